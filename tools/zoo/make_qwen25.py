"""Qwen2.5 (Qwen2.5-0.5B/1.5B-Instruct layout): GQA with q/k/v biases, no o bias, SwiGLU, RoPE theta 1e6,
rms eps 1e-6, tied embeddings. Shrunk: 2 layers, n_embd 256, 4 q / 1 kv heads x 64, FFN 256."""
import torch, zoo
from transformers import Qwen2Config, Qwen2ForCausalLM
NAME, SEED = "qwen25-tiny", 1001
d = zoo.HF / NAME
n_vocab, eos = zoo.build_tokenizer(d)
cfg = Qwen2Config(vocab_size=n_vocab, hidden_size=256, intermediate_size=256, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=1, hidden_act="silu", max_position_embeddings=32768,
                  rms_norm_eps=1e-6, tie_word_embeddings=True, rope_parameters={"rope_theta": 1000000.0, "rope_type": "default"},
                  use_sliding_window=False, sliding_window=32768, max_window_layers=2, bos_token_id=eos, eos_token_id=eos)
torch.manual_seed(SEED)
m = Qwen2ForCausalLM(cfg).float()
zoo.reinit(m, SEED)
zoo.save(m, d, "Qwen2ForCausalLM")
zoo.pipeline(NAME, d, "f16")
