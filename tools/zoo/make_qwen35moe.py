"""Qwen3.5 MoE (Qwen3.5-35B-A3B text layout, Qwen3_5MoeForCausalLM): the Qwen3.5 trunk (3 GDN : 1 gated
attention, interleaved M-RoPE sections 11:11:10 scaled to 3:3:2, partial rotary 0.25, theta 1e7) with every
FFN an MoE: softmax top-k SwiGLU experts plus a sigmoid-gated shared expert; one MTP layer (MoE); untied.
Shrunk: 4 layers, n_embd 256, GDN 2 k-heads / 4 v-heads x 64, attention 4 q / 1 kv x 64 (35B: 16:2 x 256),
4 experts x 128 with 2 used (35B: 256 x 512, 8 used), shared expert 128."""
import torch, zoo
from transformers import Qwen3_5MoeTextConfig, Qwen3_5MoeForCausalLM
NAME, SEED = "qwen35moe-tiny", 1006
d = zoo.HF / NAME
n_vocab, eos = zoo.build_tokenizer(d)
cfg = Qwen3_5MoeTextConfig(
    vocab_size=n_vocab, hidden_size=256, num_hidden_layers=4,
    num_attention_heads=4, num_key_value_heads=1, head_dim=64, hidden_act="silu",
    max_position_embeddings=262144, rms_norm_eps=1e-6, tie_word_embeddings=False, attention_bias=False,
    rope_parameters={"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25,
                     "mrope_section": [3, 3, 2], "mrope_interleaved": True},
    linear_conv_kernel_dim=4, linear_key_head_dim=64, linear_value_head_dim=64,
    linear_num_key_heads=2, linear_num_value_heads=4,
    moe_intermediate_size=128, shared_expert_intermediate_size=128, num_experts_per_tok=2, num_experts=4,
    layer_types=["linear_attention"] * 3 + ["full_attention"],
    mtp_num_hidden_layers=1, mtp_use_dedicated_embeddings=False, attn_output_gate=True,
    bos_token_id=eos, eos_token_id=eos)
torch.manual_seed(SEED)
m = Qwen3_5MoeForCausalLM(cfg).float()
zoo.reinit(m, SEED)
zoo.save(m, d, "Qwen3_5MoeForCausalLM", extra_tensors=zoo.qwen_mtp_tensors(Qwen3_5MoeForCausalLM, cfg, SEED + 100))
zoo.pipeline(NAME, d, "f16")
