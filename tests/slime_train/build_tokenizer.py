"""Build a tiny word-level tokenizer for slime's ``--hf-checkpoint``, offline.

slime loads ``AutoTokenizer.from_pretrained(--hf-checkpoint)`` for its data source and rollout, and
nothing else of the checkpoint in ``--debug-rollout-only`` mode. The vocabulary is every word of the
dataset's prompts, every word the fake engine may answer with (``agent_dialects.vocabulary``: single-turn
answers and the multi-turn dialects' turns) and a few special tokens; it is built with the
``tokenizers`` package and saved with transformers' ``save_pretrained`` (no hub download)::

    python build_tokenizer.py OUT_DIR [DATASET.jsonl]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from agent_dialects import vocabulary as answer_vocabulary

HERE = Path(__file__).resolve().parent
DATASET = HERE / "dataset.jsonl"
SPECIAL = ["<unk>", "<pad>", "<eos>"]


def vocabulary(dataset: Path) -> list[str]:
    rows = [json.loads(line) for line in dataset.read_text().splitlines() if line.strip()]
    words = set(answer_vocabulary(rows))
    for row in rows:
        words.update(row["prompt"].split())
    return SPECIAL + sorted(words)


def build(out_dir: str | Path, dataset: str | Path = DATASET) -> Path:
    """Write the tokenizer files to ``out_dir`` and return it."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {word: i for i, word in enumerate(vocabulary(Path(dataset)))}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    core.decoder = decoders.WordPiece(prefix="##")  # joins words with spaces
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, unk_token="<unk>", pad_token="<pad>", eos_token="<eos>"
    )
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(str(out))
    return out


if __name__ == "__main__":
    build(sys.argv[1], *(sys.argv[2:3] or [DATASET]))
    print(sys.argv[1])
