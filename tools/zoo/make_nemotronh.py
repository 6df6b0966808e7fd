"""Nemotron-H (Nemotron-H-8B-Base layout, NemotronHForCausalLM, dense): separate blocks per layer, from the
pattern string (M = Mamba2 mixer, - = MLP, * = attention), Mamba2 with head_dim 64, d_state 128, several
B/C groups, conv 4 with bias, gated RMSNorm per group; GQA attention without RoPE; ReLU^2 MLP (no gate);
rms eps 1e-5, untied. Shrunk: pattern "M-M*-" (8B starts "M-M-M-M*-"), n_embd 256, mamba 8 heads x 64
in 2 groups (8B: 128 heads in 8 groups), attention 4 q / 1 kv x 64 (8B: 32:8 x 128), MLP 256."""
import torch, zoo
from transformers import NemotronHConfig, NemotronHForCausalLM
NAME, SEED = "nemotronh-tiny", 1008
PATTERN = "M-M*-"
kinds = {"M": "linear_attention", "-": "mlp", "*": "full_attention"}
d = zoo.HF / NAME
n_vocab, eos = zoo.build_tokenizer(d)
cfg = NemotronHConfig(
    vocab_size=n_vocab, hidden_size=256, layers_block_type=[kinds[c] for c in PATTERN], tie_word_embeddings=False,
    num_attention_heads=4, num_key_value_heads=1, head_dim=64, max_position_embeddings=8192,
    attention_bias=False, intermediate_size=256, mlp_hidden_act="relu2", mlp_bias=False,
    ssm_state_size=128, mamba_num_heads=8, mamba_head_dim=64, n_groups=2, conv_kernel=4, expand=2,
    use_conv_bias=True, mamba_proj_bias=False, use_bias=False, layer_norm_epsilon=1e-5, chunk_size=128,
    pad_token_id=eos, bos_token_id=eos, eos_token_id=eos)
torch.manual_seed(SEED)
m = NemotronHForCausalLM(cfg).float()
zoo.reinit(m, SEED)
MOE_KEYS = ["n_routed_experts", "num_experts_per_tok", "n_shared_experts", "moe_intermediate_size",
            "moe_shared_expert_intermediate_size", "moe_latent_size", "moe_shared_expert_overlap",
            "routed_scaling_factor", "n_group", "topk_group", "norm_topk_prob", "num_nextn_predict_layers",
            "mtp_layers_block_type", "layers_block_type", "layer_types"]
def edit(c):
    # written as the published dense Nemotron-H configs are: a pattern string and no MoE keys.
    # transformers 5 saves num_experts_per_tok etc. even for dense models, and llama.cpp's converter
    # takes the presence of num_experts_per_tok to mean NEMOTRON_H_MOE.
    for k in MOE_KEYS:
        c.pop(k, None)
    c["hybrid_override_pattern"] = PATTERN
    c["num_hidden_layers"] = len(PATTERN)
zoo.save(m, d, "NemotronHForCausalLM", cfg_edit=edit)
zoo.pipeline(NAME, d, "f16", raw_config=True)
