"""CodeBERTScore F1 of a turn's file against canonical.py: the ``code-bert-score`` package's number.

The package's defaults, computed here with transformers + torch (optional
extras) so the metric needs no extra package, and checked against the package
itself by tests/test_metrics_codebert.py:

* both files are stripped and encoded whole, with the start and end tokens, and
  embedded by the encoder's layer ``num_layers``;
* a file longer than the tokenizer's window is embedded in windows that overlap
  by half, each token taken from one window away from its inner edges
  (``window_spans``); a pair is windowed over the longer file's length, as the
  package does when it pads the pair into one batch;
* tokens that are only punctuation (operators ``+-*/&|~`` excepted) or only
  whitespace are dropped; the start and end tokens stay as match targets with
  zero weight;
* precision is the weighted mean over candidate tokens of the best cosine
  similarity to a reference token, recall the converse, F1 their harmonic
  mean; a file with no token left scores 0.

The model is ``--codebert-model`` / $RECODE_CODEBERT_MODEL (a local folder),
default neulab/codebert-python at layer 11, the package's choice for Python;
``--codebert-layers`` / $RECODE_CODEBERT_LAYERS overrides the layer. Models
are read from disk only (a folder or the Hugging Face cache), never fetched
mid-report, so a table never waits on the network.

Usage: python metrics/metric_codebert.py --output-dir DIR --model m1,m2 [--codebert-model PATH]
"""
from __future__ import annotations

import argparse
import os
import string
import sys
from collections.abc import Callable, Iterable
from functools import lru_cache, partial
from pathlib import Path

from metric_aggregate import level_values
from metric_cli import Context, run_cli
from metric_tables import Table
from optional_extras import ExtraUnavailable, import_extra
from metric_codebleu import calculate_codebleu
from reference_similarity import get_empty_filal_code, reference_scorer, reference_tables, remove_codecomments
from result_files import DEFAULT_GUIDANCE_TYPE, DEFAULT_SETTING, LEVELS, RunSelection
from task_meta import DEFAULT_DATASET_DIR, read_canonical

__all__ = ["calculate_codebert", "calculate_codebleu", "get_empty_filal_code", "get_init_model_code_bert",
           "get_model_code_bert", "read_canonical", "remove_codecomments"]

DEFAULT_MODEL = "neulab/codebert-python"
DEFAULT_LAYERS = 11
ENV_MODEL = "RECODE_CODEBERT_MODEL"
ENV_LAYERS = "RECODE_CODEBERT_LAYERS"
PURPOSE = "CodeBERTScore"
FETCH_HINT = (f"models are only read from disk: fetch it once (hf download {DEFAULT_MODEL}) "
              f"or point --codebert-model / ${ENV_MODEL} at a local folder")


CHUNK_OVERLAP = 0.5
KEPT_PUNCTUATION = set("+-*/&|~")  # operators carry meaning in code
DROPPED_CHARACTERS = set(string.punctuation) - KEPT_PUNCTUATION
WHITESPACE_MARKS = "\u0120\u010a\u0109"  # byte-level BPE's space, newline and tab


def window_spans(n_tokens: int, size: int, overlap: float = CHUNK_OVERLAP) -> list[tuple[int, int, int, int]]:
    """(start, end, keep_from, keep_to) windows of at most ``size`` tokens covering ``n_tokens``.

    Consecutive windows overlap by ``overlap`` of their size; the kept ranges are
    contiguous and each stays ``size * overlap / 2`` tokens away from the inner
    edges of its window, the first starting at 0 and the last ending at ``n_tokens``.
    """
    if n_tokens <= size:
        return [(0, n_tokens, 0, n_tokens)]
    margin = int(size * overlap / 2)
    stride = size - 2 * margin
    start, end, keep_to = 0, size, size - margin
    spans = [(start, end, 0, keep_to)]
    while end < n_tokens:
        end = min(n_tokens, end + stride)
        last = end == n_tokens
        start = n_tokens - size if last else start + stride
        keep_from, keep_to = keep_to, n_tokens if last else keep_to + stride
        spans.append((start, end, keep_from, keep_to))
    return spans


def is_dropped_token(token: str) -> bool:
    """Whether a token carries no code: only punctuation or only whitespace once its space marks are stripped."""
    return all(char in DROPPED_CHARACTERS for char in token.strip(WHITESPACE_MARKS))


def resolve_model(model_path: str | None, num_layers: int | None) -> tuple[str, int]:
    """Argument, else environment variable, else CodeBERTScore's Python default."""
    path = model_path or os.environ.get(ENV_MODEL) or DEFAULT_MODEL
    layers = num_layers or os.environ.get(ENV_LAYERS) or DEFAULT_LAYERS
    try:
        return path, int(layers)
    except ValueError:
        raise ExtraUnavailable(f"{ENV_LAYERS} must be an integer, got '{layers}'") from None


class CodeBertScorer:
    """An encoder and its tokenizer, loaded once, scoring (candidate, reference) pairs."""

    def __init__(self, model_path: str, num_layers: int) -> None:
        folder = Path(model_path).expanduser()
        if folder.is_dir():
            model_path = str(folder)
        elif model_path.startswith(("/", ".", "~")):
            raise ExtraUnavailable(f"CodeBERT model folder {model_path} does not exist; {FETCH_HINT}")
        self.torch = import_extra("torch", PURPOSE)
        transformers = import_extra("transformers", PURPOSE)
        transformers.utils.logging.disable_progress_bar()
        try:
            self.model = transformers.AutoModel.from_pretrained(model_path, local_files_only=True).eval()
            self.tokenizer = transformers.AutoTokenizer.from_pretrained(model_path, local_files_only=True)
        except (OSError, ValueError) as exc:
            first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ExtraUnavailable(f"cannot load CodeBERT model '{model_path}' ({first_line}); {FETCH_HINT}") from None
        finally:
            transformers.utils.logging.enable_progress_bar()
        available = self.model.config.num_hidden_layers
        if not 0 <= num_layers <= available:
            raise ExtraUnavailable(f"num_layers {num_layers} is outside 0..{available} for model '{model_path}'")
        if self.tokenizer.cls_token_id is None or self.tokenizer.sep_token_id is None:
            raise ExtraUnavailable(f"tokenizer of '{model_path}' has no CLS/SEP tokens; use a BERT/RoBERTa-style model")
        self.num_layers = num_layers
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        self.window = min(self.tokenizer.model_max_length, self.model.config.max_position_embeddings - 2)

    def encode(self, text: str) -> list[int]:
        """Token ids of the stripped text with the start and end tokens, never truncated."""
        return self.tokenizer(text.strip(), add_special_tokens=True, truncation=False, verbose=False)["input_ids"]

    def embed(self, ids: list[int], length: int):
        """Unit-length embeddings [tokens, hidden] of ``ids`` windowed as if padded to ``length`` tokens."""
        torch = self.torch
        padded = torch.tensor([ids + [self.pad_id] * (length - len(ids))])
        mask = torch.tensor([[1] * len(ids) + [0] * (length - len(ids))])
        parts = []
        with torch.no_grad():
            for start, end, keep_from, keep_to in window_spans(length, self.window):
                out = self.model(padded[:, start:end], attention_mask=mask[:, start:end], output_hidden_states=True)
                parts.append(out.hidden_states[self.num_layers][0, keep_from - start:keep_to - start])
        return torch.nn.functional.normalize(torch.cat(parts)[:len(ids)], dim=-1)

    def matching_side(self, ids: list[int], length: int):
        """(embeddings, weights) of the tokens that take part in matching: code tokens weigh 1, start/end 0."""
        tokens = self.tokenizer.convert_ids_to_tokens(ids)
        kept = [i for i, token in enumerate(tokens) if not is_dropped_token(token)]
        special = {self.tokenizer.cls_token_id, self.tokenizer.sep_token_id}
        weights = self.torch.tensor([0.0 if ids[i] in special else 1.0 for i in kept])
        return self.embed(ids, length)[kept], weights

    def f1(self, candidate: str, reference: str) -> float:
        """The package's F1 of one pair; an empty file (or one with no code token) scores 0."""
        if not candidate.strip() or not reference.strip():
            return 0.0
        cand_ids, ref_ids = self.encode(candidate), self.encode(reference)
        length = max(len(cand_ids), len(ref_ids))
        (cand, cand_w), (ref, ref_w) = self.matching_side(cand_ids, length), self.matching_side(ref_ids, length)
        if not cand_w.sum() or not ref_w.sum():
            return 0.0
        similarity = cand @ ref.T
        precision = (similarity.max(dim=1).values * cand_w).sum() / cand_w.sum()
        recall = (similarity.max(dim=0).values * ref_w).sum() / ref_w.sum()
        total = (precision + recall).item()
        return 0.0 if total <= 0 else (2 * precision * recall).item() / total


@lru_cache(maxsize=2)
def load_scorer(model_path: str, num_layers: int) -> CodeBertScorer:
    return CodeBertScorer(model_path, num_layers)


@lru_cache(maxsize=4096)
def _pair_f1(model_path: str, num_layers: int, candidate: str, reference: str) -> float:
    return load_scorer(model_path, num_layers).f1(candidate, reference)


def code_bert_f1(model_path: str | None = None, num_layers: int | None = None) -> Callable[[str, str], float]:
    """``(candidate, reference) -> F1`` for the resolved model; loads it now so a bad path fails early."""
    resolved = resolve_model(model_path, num_layers)
    load_scorer(*resolved)
    return partial(_pair_f1, *resolved)


def calculate_codebert(generated: str, references: str, model_path: str | None = None,
                       num_layers: int | None = None) -> float:
    """CodeBERTScore F1 of one generated file against its reference."""
    return code_bert_f1(model_path, num_layers)(generated, references)


def get_model_code_bert(
    model: str, task_ids: Iterable[int], result_dir: Path | str | None = None, *,
    meta_path: Path | str | None = None, setting: str = DEFAULT_SETTING, guidance_type: str = DEFAULT_GUIDANCE_TYPE,
    dataset_dir: Path | str = DEFAULT_DATASET_DIR, levels: Iterable[int] = LEVELS,
    model_path: str | None = None, num_layers: int | None = None,
) -> list[float | None]:
    """Mean CodeBERTScore F1 of the last turn's file per guidance level."""
    scorer = reference_scorer(dataset_dir, -1, code_bert_f1(model_path, num_layers))
    return level_values(model, task_ids, scorer, RunSelection(result_dir, setting, guidance_type, levels))


def get_init_model_code_bert(
    model: str, task_ids: Iterable[int], result_dir: Path | str | None = None, *,
    meta_path: Path | str | None = None, setting: str = DEFAULT_SETTING, guidance_type: str = DEFAULT_GUIDANCE_TYPE,
    dataset_dir: Path | str = DEFAULT_DATASET_DIR, levels: Iterable[int] = LEVELS,
    model_path: str | None = None, num_layers: int | None = None,
) -> list[float | None]:
    """Mean CodeBERTScore F1 of the turn-0 file per guidance level."""
    scorer = reference_scorer(dataset_dir, 0, code_bert_f1(model_path, num_layers))
    return level_values(model, task_ids, scorer, RunSelection(result_dir, setting, guidance_type, levels))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--codebert-model", help=f"model id or local folder (default ${ENV_MODEL} or {DEFAULT_MODEL})")
    parser.add_argument("--codebert-layers", type=int, help=f"encoder layer to use (default {DEFAULT_LAYERS})")


def tables(ctx: Context) -> list[Table]:
    return reference_tables(ctx, "CodeBERTScore F1", code_bert_f1(ctx.args.codebert_model, ctx.args.codebert_layers))


def main(argv: Iterable[str] | None = None) -> int:
    return run_cli(__doc__, tables, add_arguments, argv, turn_options=())


if __name__ == "__main__":
    sys.exit(main())
