"""LFM2 (LFM2-350M/700M/1.2B layout; LFM2.5 text models use the same Lfm2ForCausalLM architecture):
gated short-conv blocks (L_cache 3, no conv bias) with GQA attention blocks at indices 2 and 5 (the start of
the published pattern [2,5,8,10,12,14]), q/k layernorm, SwiGLU FFN with block_auto_adjust_ff_dim
(2/3 x intermediate_size rounded up to block_multiple_of 256), RoPE theta 1e6, norm eps 1e-5, tied embeddings.
Shrunk: 6 layers, n_embd 256, 4 q / 2 kv heads x 64 (350M is 16:8), intermediate_size 384 -> FFN 256."""
import torch, zoo
from transformers import Lfm2Config, Lfm2ForCausalLM
NAME, SEED = "lfm2-tiny", 1003
d = zoo.HF / NAME
n_vocab, eos = zoo.build_tokenizer(d)
cfg = Lfm2Config(vocab_size=n_vocab, hidden_size=256, intermediate_size=384, num_hidden_layers=6,
                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128000, norm_eps=1e-5,
                 tie_word_embeddings=True, rope_parameters={"rope_theta": 1000000.0, "rope_type": "default"},
                 conv_bias=False, conv_L_cache=3, block_multiple_of=256, block_ffn_dim_multiplier=1.0,
                 block_auto_adjust_ff_dim=True, full_attn_idxs=[2, 5],
                 pad_token_id=eos, bos_token_id=eos, eos_token_id=eos)
torch.manual_seed(SEED)
m = Lfm2ForCausalLM(cfg).float()
zoo.reinit(m, SEED)
zoo.save(m, d, "Lfm2ForCausalLM")
zoo.pipeline(NAME, d, "f16")
