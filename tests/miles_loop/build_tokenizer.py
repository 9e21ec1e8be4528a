"""Build a small byte-level BPE tokenizer (and a tiny model config) for miles' ``--hf-checkpoint``, offline.

miles' mock SGLang server and its rollout load ``AutoTokenizer.from_pretrained(--hf-checkpoint)`` (by default
``Qwen/Qwen3-0.6B``, a download). A byte-level tokenizer round-trips any text, so the prompts the mock server
decodes and the answers it encodes come back exactly. Trained with the ``tokenizers`` package on a few lines,
saved with transformers' ``save_pretrained`` (no hub download), beside a one-layer Qwen3 config (miles' argument
parser reads the checkpoint's config for its layer count; no weights are ever loaded)::

    python build_tokenizer.py OUT_DIR
"""

from __future__ import annotations

import sys
from pathlib import Path

CORPUS = [f"What is {a}+{b}? \\boxed{{{a + b}}}" for a in range(10) for b in range(10)]
SPECIAL = ["<unk>", "<pad>", "<eos>"]


def build(out_dir: str | Path) -> Path:
    """Write the tokenizer files to ``out_dir`` and return it."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE(unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=SPECIAL,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    core.train_from_iterator(CORPUS, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, unk_token="<unk>", pad_token="<pad>",
                                        eos_token="<eos>")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(str(out))
    from transformers import Qwen3Config

    Qwen3Config(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                num_attention_heads=2, num_key_value_heads=1, head_dim=8).save_pretrained(str(out))
    return out


if __name__ == "__main__":
    build(sys.argv[1])
    print(sys.argv[1])
