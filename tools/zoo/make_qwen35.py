"""Qwen3.5 dense (Qwen3.5-0.8B/2B/4B/9B text layout, Qwen3_5ForCausalLM): 3 Gated DeltaNet layers then 1 gated
full-attention layer (repeating), GDN key heads : value heads = 1:2, conv 4, attention q:kv = 4:1 with output
gate, q/k norms, head_dim 4x rotary dim (partial_rotary_factor 0.25), interleaved M-RoPE sections 11:11:10
(scaled to 3:3:2), theta 1e7, SwiGLU FFN, one MTP layer, tied embeddings (as the small Qwen3.5 sizes).
Shrunk: 4 layers, n_embd 256, GDN 2 k-heads / 4 v-heads x 64, attention 4 q / 1 kv x 64, FFN 256."""
import torch, zoo
from transformers import Qwen3_5TextConfig, Qwen3_5ForCausalLM
NAME, SEED = "qwen35-tiny", 1002
d = zoo.HF / NAME
n_vocab, eos = zoo.build_tokenizer(d)
cfg = Qwen3_5TextConfig(
    vocab_size=n_vocab, hidden_size=256, intermediate_size=256, num_hidden_layers=4,
    num_attention_heads=4, num_key_value_heads=1, head_dim=64, hidden_act="silu",
    max_position_embeddings=262144, rms_norm_eps=1e-6, tie_word_embeddings=True, attention_bias=False,
    rope_parameters={"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25,
                     "mrope_section": [3, 3, 2], "mrope_interleaved": True},
    linear_conv_kernel_dim=4, linear_key_head_dim=64, linear_value_head_dim=64,
    linear_num_key_heads=2, linear_num_value_heads=4,
    layer_types=["linear_attention"] * 3 + ["full_attention"],
    mtp_num_hidden_layers=1, mtp_use_dedicated_embeddings=False, attn_output_gate=True,
    bos_token_id=eos, eos_token_id=eos)
torch.manual_seed(SEED)
m = Qwen3_5ForCausalLM(cfg).float()
zoo.reinit(m, SEED)
zoo.save(m, d, "Qwen3_5ForCausalLM", extra_tensors=zoo.qwen_mtp_tensors(Qwen3_5ForCausalLM, cfg, SEED + 100))
zoo.pipeline(NAME, d, "f16")
