"""Falcon-H1 (Falcon-H1-0.5B layout, FalconH1ForCausalLM): every layer runs GQA attention (RoPE theta 1e11)
and a Mamba2 mixer side by side on one input norm (mamba d_head 64, d_state 128, 1 group, conv 4 with
bias, no proj bias, no mamba rms norm), SwiGLU FFN, muP multipliers as published for 0.5B
(embedding 5.656854, lm_head 0.0390625, key 0.390625, attention out 0.9375, mlp [0.8838835, 0.5859375],
ssm_in 1.25, ssm_out 0.2357023, ssm_multipliers [0.3535534, 0.25, 0.3535534, 0.5, 0.3535534]),
rms eps 1e-5, untied. Shrunk: 2 layers, n_embd 256, 4 q / 1 kv x 64 (0.5B: 8:2 x 64), mamba 8 heads x 64
(d_ssm 512), FFN 256."""
import torch, zoo
from transformers import FalconH1Config, FalconH1ForCausalLM
NAME, SEED = "falconh1-tiny", 1007
d = zoo.HF / NAME
n_vocab, eos = zoo.build_tokenizer(d)
cfg = FalconH1Config(
    vocab_size=n_vocab, tie_word_embeddings=False, hidden_size=256, intermediate_size=256, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=1, head_dim=64, hidden_act="silu", rms_norm_eps=1e-5,
    max_position_embeddings=16384, mamba_d_ssm=512, mamba_n_heads=8, mamba_d_head=64, mamba_n_groups=1,
    mamba_d_state=128, mamba_d_conv=4, mamba_expand=2, mamba_chunk_size=128, mamba_conv_bias=True,
    mamba_proj_bias=False, mamba_norm_before_gate=False, mamba_rms_norm=False, projectors_bias=False,
    rope_parameters={"rope_theta": 100000000000.0, "rope_type": "default"},
    lm_head_multiplier=0.0390625, embedding_multiplier=5.656854249492381,
    mlp_multipliers=[0.8838834764831844, 0.5859375], key_multiplier=0.390625, attention_out_multiplier=0.9375,
    attention_in_multiplier=1.0, ssm_multipliers=[0.3535533905932738, 0.25, 0.3535533905932738, 0.5, 0.3535533905932738],
    ssm_in_multiplier=1.25, ssm_out_multiplier=0.23570226039551587, attention_bias=False, mlp_bias=False,
    pad_token_id=eos, bos_token_id=eos, eos_token_id=eos)
torch.manual_seed(SEED)
m = FalconH1ForCausalLM(cfg).float()
# lm_head_multiplier 0.039 shrinks logits; a larger lm_head gain keeps greedy decisive
zoo.reinit(m, SEED, lm_head_gain=40.0)
zoo.save(m, d, "FalconH1ForCausalLM")
zoo.pipeline(NAME, d, "f16")
