"""Qwen3-Next (Qwen3-Next-80B-A3B layout, Qwen3NextForCausalLM): 3 Gated DeltaNet layers then 1 gated
full-attention layer, GDN key:value heads 1:2 (grouped V heads, one in_proj_qkvz and one in_proj_ba),
conv 4, attention with output gate, q/k norms, partial_rotary_factor 0.25 (plain NeoX RoPE, theta 1e7),
(1+w) RMSNorms, every layer MoE (decoder_sparse_step 1): softmax top-k with norm_topk_prob, SwiGLU experts
plus a shared expert behind a sigmoid shared_expert_gate; one MTP layer (mtp.* in the checkpoint, a MoE
layer); untied embeddings. Shrunk: 4 layers, n_embd 256, GDN 2 k-heads / 4 v-heads x 64, attention
4 q / 1 kv x 64 (80B is 16:2 x 256), 4 experts x 128 with 2 used (80B: 512 x 512, 10 used), shared 128."""
import torch, zoo
from transformers import Qwen3NextConfig, Qwen3NextForCausalLM
NAME, SEED = "qwen3next-tiny", 1005
d = zoo.HF / NAME
n_vocab, eos = zoo.build_tokenizer(d)
cfg = Qwen3NextConfig(
    vocab_size=n_vocab, hidden_size=256, intermediate_size=256, num_hidden_layers=4,
    num_attention_heads=4, num_key_value_heads=1, head_dim=64, hidden_act="silu",
    max_position_embeddings=262144, rms_norm_eps=1e-6, tie_word_embeddings=False, attention_bias=False,
    rope_parameters={"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25},
    linear_conv_kernel_dim=4, linear_key_head_dim=64, linear_value_head_dim=64,
    linear_num_key_heads=2, linear_num_value_heads=4, decoder_sparse_step=1,
    moe_intermediate_size=128, shared_expert_intermediate_size=128, num_experts_per_tok=2, num_experts=4,
    norm_topk_prob=True, mlp_only_layers=[], layer_types=["linear_attention"] * 3 + ["full_attention"],
    bos_token_id=eos, eos_token_id=eos)
torch.manual_seed(SEED)
m = Qwen3NextForCausalLM(cfg).float()
zoo.reinit(m, SEED)
zoo.save(m, d, "Qwen3NextForCausalLM", extra_tensors=zoo.qwen_mtp_tensors(Qwen3NextForCausalLM, cfg, SEED + 100))
zoo.pipeline(NAME, d, "f16")
