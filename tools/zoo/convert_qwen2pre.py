"""Run llama.cpp's convert_hf_to_gguf.py unchanged, except that the BPE pre-tokenizer
check is bypassed: get_vocab_base_pre() answers "qwen2" (our tiny home-made byte-level
BPE uses the Qwen2 pre-tokenizer regex but its hash is of course unknown to the converter)."""
import os
import sys
from pathlib import Path
LLAMA = Path(os.environ.get("LLAMA_CPP_DIR", "/work/llama/llama_cpp_python-0.3.36/vendor/llama.cpp"))
sys.path.insert(0, str(LLAMA))
sys.path.insert(1, str(LLAMA / "gguf-py"))
import conversion.base as base  # noqa: E402
base.TextModel.get_vocab_base_pre = lambda self, tokenizer: "qwen2"
import os, json  # noqa: E402
if os.environ.get("ZOO_RAW_CONFIG") == "1":
    # Read config.json as written (the converter's own fallback path when AutoConfig fails).
    # Needed for dense Nemotron-H: transformers 5's NemotronHConfig.to_dict() always carries
    # num_experts_per_tok, which the converter takes as "this is NEMOTRON_H_MOE".
    _orig = base.ModelBase.load_hparams
    def _raw(dir_model, is_mistral_format):
        with open(Path(dir_model) / "config.json", encoding="utf-8") as f:
            return json.load(f)
    base.ModelBase.load_hparams = staticmethod(_raw)
import convert_hf_to_gguf  # noqa: E402
assert Path(convert_hf_to_gguf.gguf.__file__).is_relative_to(LLAMA), convert_hf_to_gguf.gguf.__file__
convert_hf_to_gguf.main()
