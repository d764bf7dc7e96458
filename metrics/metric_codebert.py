"""CodeBERTScore F1 of a turn's file against canonical.py (SPEC §5).

BERTScore-style matching computed here with transformers + torch (optional
extras): each token is embedded by the encoder's layer ``num_layers``; special
tokens are left out; precision is the mean over candidate tokens of the best
cosine similarity to a reference token, recall the converse, F1 their
harmonic mean. Files longer than the encoder's window are embedded in
half-overlapping windows, each token taken from the window where it sits
furthest from an edge, so long files are scored whole rather than truncated.

The model is ``--codebert-model`` / $RECODE_CODEBERT_MODEL (a local folder),
default neulab/codebert-python at layer 11, CodeBERTScore's choice for Python;
``--codebert-layers`` / $RECODE_CODEBERT_LAYERS overrides the layer. Models
are read from disk only (a folder or the Hugging Face cache), never fetched
mid-report, so a table never waits on the network.

Usage: python metrics/metric_codebert.py --result-dir DIR --models m1,m2 [--codebert-model PATH]
"""
from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterable
from functools import lru_cache, partial
from pathlib import Path

from metric_aggregate import level_values
from metric_cli import Context, run_cli
from metric_tables import Table
from optional_extras import ExtraUnavailable, import_extra
from reference_similarity import reference_scorer, reference_tables
from result_files import DEFAULT_GUIDANCE_TYPE, DEFAULT_SETTING, LEVELS, RunSelection
from task_meta import DEFAULT_DATASET_DIR

DEFAULT_MODEL = "neulab/codebert-python"
DEFAULT_LAYERS = 11
ENV_MODEL = "RECODE_CODEBERT_MODEL"
ENV_LAYERS = "RECODE_CODEBERT_LAYERS"
PURPOSE = "CodeBERTScore"
FETCH_HINT = (f"models are only read from disk: fetch it once (hf download {DEFAULT_MODEL}) "
              f"or point --codebert-model / ${ENV_MODEL} at a local folder")


def window_spans(n_tokens: int, size: int) -> list[tuple[int, int, int, int]]:
    """(start, end, keep_from, keep_to) windows of ``size`` tokens covering ``n_tokens``.

    Windows advance by half their size; each token is kept from exactly one
    window, at least a quarter window away from that window's inner edges.
    """
    if n_tokens <= size:
        return [(0, n_tokens, 0, n_tokens)]
    half, margin = size // 2, size // 4
    starts = list(range(0, n_tokens - size, half)) + [n_tokens - size]
    spans, keep_from = [], 0
    for i, start in enumerate(starts):
        keep_to = n_tokens if i == len(starts) - 1 else start + size - margin
        spans.append((start, start + size, keep_from, keep_to))
        keep_from = keep_to
    return spans


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
        if not 1 <= num_layers <= available:
            raise ExtraUnavailable(f"num_layers {num_layers} is outside 1..{available} for model '{model_path}'")
        if self.tokenizer.cls_token_id is None or self.tokenizer.sep_token_id is None:
            raise ExtraUnavailable(f"tokenizer of '{model_path}' has no CLS/SEP tokens; use a BERT/RoBERTa-style model")
        self.num_layers = num_layers
        position_limit = self.model.config.max_position_embeddings - 2
        self.window = min(self.tokenizer.model_max_length, position_limit) - 2

    def embed(self, text: str):
        """Unit-length embeddings of the text's tokens (no special tokens), shape [tokens, hidden]."""
        torch = self.torch
        ids = self.tokenizer(text.strip(), add_special_tokens=False)["input_ids"]
        cls, sep = self.tokenizer.cls_token_id, self.tokenizer.sep_token_id
        parts = []
        with torch.no_grad():
            for start, end, keep_from, keep_to in window_spans(len(ids), self.window):
                chunk = torch.tensor([[cls] + ids[start:end] + [sep]])
                hidden = self.model(chunk, output_hidden_states=True).hidden_states[self.num_layers][0, 1:-1]
                parts.append(hidden[keep_from - start:keep_to - start])
        return torch.nn.functional.normalize(torch.cat(parts), dim=-1)

    def f1(self, candidate: str, reference: str) -> float:
        if not candidate.strip() or not reference.strip():
            return 0.0
        similarity = self.embed(candidate) @ self.embed(reference).T
        precision = similarity.max(dim=1).values.mean().item()
        recall = similarity.max(dim=0).values.mean().item()
        return 0.0 if precision + recall <= 0 else 2 * precision * recall / (precision + recall)


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
    return run_cli(__doc__, tables, add_arguments, argv)


if __name__ == "__main__":
    sys.exit(main())
