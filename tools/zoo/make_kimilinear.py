"""Kimi Linear (Kimi-Linear-48B-A3B layout, KimiLinearForCausalLM): Kimi Delta Attention layers (q/k/v short
convs of 4 taps, per-channel decay through a low-rank f_a/f_b projection, beta, low-rank sigmoid output gate
g_a/g_b, per-head o_norm) with an MLA layer every 4th (kv_lora, no q_lora, mla_use_nope: no RoPE); first layer
a dense SwiGLU FFN (first_k_dense_replace 1), then MoE: sigmoid-scored experts with e_score_correction_bias,
renormalised top-k, routed_scaling_factor 2.446, one shared expert; rms eps 1e-5, untied.
Shrunk: 4 layers (KDA, KDA, KDA, MLA; 48B has full_attn_layers every 4th), n_embd 256, KDA 4 heads x 64
(48B: 32 x 128), MLA 4 heads, kv_lora 128, nope 64, rope-part 32, v 64 (48B: 512/128/64/128), dense FFN 256,
4 experts x 128 with 2 used (48B: 256 x 1024, 8 used), 1 shared expert.
The checkpoint is written by transformers' native KimiLinear (it saves the original remote-code tensor
names); config.json is then written in the published remote-code form (linear_attn_config etc.), which is
what llama.cpp's converter reads, and the converter is run on config.json as written."""
import torch, zoo
from transformers import KimiLinearConfig, KimiLinearForCausalLM
NAME, SEED = "kimilinear-tiny", 1009
d = zoo.HF / NAME
n_vocab, eos = zoo.build_tokenizer(d)
L = 4
full_attn_1based = [4]
cfg = KimiLinearConfig(
    vocab_size=n_vocab, hidden_size=256, intermediate_size=256, moe_intermediate_size=128, num_hidden_layers=L,
    num_attention_heads=4, num_key_value_heads=4, num_shared_experts=1, routed_scaling_factor=2.446,
    kv_lora_rank=128, q_lora_rank=None, qk_rope_head_dim=32, v_head_dim=64, qk_nope_head_dim=64,
    num_expert_group=1, topk_group=1, num_experts_per_token=2, moe_renormalize=True, hidden_act="silu",
    rms_norm_eps=1e-5, tie_word_embeddings=False, num_experts=4,
    mlp_layer_types=["dense"] + ["sparse"] * (L - 1),
    layer_types=["full_attention" if i + 1 in full_attn_1based else "linear_attention" for i in range(L)],
    linear_head_dim=64, linear_num_heads=4, linear_conv_kernel_dim=4,
    pad_token_id=eos, bos_token_id=eos, eos_token_id=eos)
torch.manual_seed(SEED)
m = KimiLinearForCausalLM(cfg).float()
zoo.reinit(m, SEED)
def edit(c):
    c.update({
        "linear_attn_config": {"full_attn_layers": full_attn_1based, "head_dim": 64,
                               "kda_layers": [i + 1 for i in range(L) if i + 1 not in full_attn_1based],
                               "num_heads": 4, "short_conv_kernel_size": 4},
        "first_k_dense_replace": 1, "moe_layer_freq": 1, "moe_router_activation_func": "sigmoid",
        "use_grouped_topk": True, "mla_use_nope": True, "num_nextn_predict_layers": 0,
        "rope_theta": 10000.0,
    })
def rename(k):
    # the published checkpoint names the dense FFN of layer 0 mlp.*; transformers writes block_sparse_moe.*_proj
    if k.startswith("model.layers.0.block_sparse_moe.") and k.endswith(("gate_proj.weight", "up_proj.weight", "down_proj.weight")) and "shared" not in k:
        return k.replace("block_sparse_moe.", "mlp.")
    return k
zoo.save(m, d, "KimiLinearForCausalLM", cfg_edit=edit, rename=rename)
zoo.pipeline(NAME, d, "f16", raw_config=True)
