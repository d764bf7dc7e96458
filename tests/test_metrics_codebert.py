"""CodeBERTScore with a tiny RoBERTa and tokenizer built here from a config (no download)."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.metrics_helpers import MODEL, passed, write_dataset, write_result
import metric_codebert
from optional_extras import ExtraUnavailable

CORPUS = [
    "def add(a, b):\n    return a + b\n",
    "class Model:\n    def forward(self, x):\n        return self.linear(x)\n",
    "import torch\nx = torch.zeros(3)\ny = x.sum()  # total\n",
    "for i in range(10):\n\ttotal += values[i] * weight\n",
]
REFERENCE = CORPUS[1]
CLOSE = "class Model:\n    def forward(self, x):\n        return self.linear(x) + 1\n"
DIFFERENT = CORPUS[2]
WINDOW = 16


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> str:
    """A 2-layer RoBERTa with a byte-level BPE tokenizer trained here and a 16-token window (no download)."""
    pytest.importorskip("transformers", reason="optional extra transformers not installed")
    torch = pytest.importorskip("torch", reason="optional extra torch not installed")
    from tokenizers import ByteLevelBPETokenizer, processors
    from transformers import PreTrainedTokenizerFast, RobertaConfig, RobertaModel

    folder = tmp_path_factory.mktemp("tiny_codebert")
    tokenizer = ByteLevelBPETokenizer()
    tokenizer.train_from_iterator(CORPUS * 4, vocab_size=300, min_frequency=1,
                                  special_tokens=["<s>", "<pad>", "</s>", "<unk>"])
    tokenizer.post_processor = processors.RobertaProcessing(("</s>", tokenizer.token_to_id("</s>")),
                                                            ("<s>", tokenizer.token_to_id("<s>")))
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>", cls_token="<s>",
                            sep_token="</s>", pad_token="<pad>", unk_token="<unk>",
                            model_max_length=WINDOW).save_pretrained(folder)
    config = RobertaConfig(vocab_size=tokenizer.get_vocab_size(), hidden_size=32, num_hidden_layers=2,
                           num_attention_heads=2, intermediate_size=64, max_position_embeddings=WINDOW + 2,
                           pad_token_id=1, bos_token_id=0, eos_token_id=2)
    torch.manual_seed(0)
    RobertaModel(config).save_pretrained(folder)
    return str(folder)


@pytest.fixture(autouse=True)
def offline(monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv(metric_codebert.ENV_MODEL, raising=False)
    monkeypatch.delenv(metric_codebert.ENV_LAYERS, raising=False)


@pytest.mark.parametrize("n_tokens, size", [(5, 8), (8, 8), (9, 8), (37, 8), (100, 12), (1000, 512), (7, 2)])
def test_windows_keep_every_token_exactly_once(n_tokens: int, size: int) -> None:
    spans = metric_codebert.window_spans(n_tokens, size)
    kept = [i for start, end, keep_from, keep_to in spans for i in range(keep_from, keep_to)]
    assert kept == list(range(n_tokens))
    assert all(end - start <= size and start <= keep_from <= keep_to <= end for start, end, keep_from, keep_to in spans)


def test_identical_code_scores_one_and_different_code_less(tiny_model: str) -> None:
    f1 = metric_codebert.code_bert_f1(tiny_model, 2)
    assert f1(REFERENCE, REFERENCE) == pytest.approx(1.0, abs=1e-5)
    assert f1(DIFFERENT, REFERENCE) < f1(CLOSE, REFERENCE) < 1.0
    assert f1("", REFERENCE) == 0.0


@pytest.mark.slow
def test_long_files_are_scored_whole(tiny_model: str) -> None:
    f1 = metric_codebert.code_bert_f1(tiny_model, 1)
    long_reference = "".join(CORPUS * 3)
    assert f1(long_reference, long_reference) == pytest.approx(1.0, abs=1e-5)
    assert f1("".join(CORPUS[:2] * 3), long_reference) < 1.0


def test_model_comes_from_the_environment(tiny_model: str, tmp_path: Path, monkeypatch) -> None:
    dataset = write_dataset(tmp_path / "ds", {1: 1, 2: 1}, {1: REFERENCE, 2: REFERENCE})
    result_dir = tmp_path / "res"
    write_result(result_dir, 0, 1, [passed(0, code=REFERENCE)])
    write_result(result_dir, 0, 2, [passed(0, code=DIFFERENT)])
    monkeypatch.setenv(metric_codebert.ENV_MODEL, tiny_model)
    monkeypatch.setenv(metric_codebert.ENV_LAYERS, "2")
    different = metric_codebert.code_bert_f1(tiny_model, 2)(DIFFERENT, REFERENCE)
    value = metric_codebert.get_model_code_bert(MODEL, [1, 2], result_dir, dataset_dir=dataset, levels=[0])
    assert value == [pytest.approx((1.0 + different) / 2, abs=1e-5)]
    assert metric_codebert.get_init_model_code_bert(MODEL, [1, 2], result_dir, dataset_dir=dataset, levels=[0]) == value


def test_unusable_models_fail_in_one_line(tiny_model: str, tmp_path: Path) -> None:
    with pytest.raises(ExtraUnavailable, match="model folder .*no-model does not exist"):
        metric_codebert.code_bert_f1(str(tmp_path / "no-model"), 2)
    with pytest.raises(ExtraUnavailable, match="cannot load CodeBERT model") as info:
        metric_codebert.code_bert_f1(str(tmp_path), 2)
    assert "\n" not in str(info.value)
    with pytest.raises(ExtraUnavailable, match=r"num_layers 5 is outside 0..2"):
        metric_codebert.code_bert_f1(tiny_model, 5)


def test_punctuation_and_whitespace_tokens_are_dropped_operators_kept() -> None:
    assert all(metric_codebert.is_dropped_token(t) for t in ["(", "):", "\u0120", "\u010a\u0109", "\u0120.", ""])
    assert not any(metric_codebert.is_dropped_token(t) for t in ["+", "\u0120*", "<s>", "\u0120x", "1", "+="])


PARITY_PAIRS = {
    "close": (CLOSE, REFERENCE),
    "different": (DIFFERENT, REFERENCE),
    "identical": (REFERENCE, REFERENCE),
    "operators only": ("a + b * c", "a - b / c"),
    "long vs long (windowed)": ("".join(CORPUS[:3] * 3), "".join(CORPUS * 3)),
    "short vs long (padded windows)": (CORPUS[0] + CORPUS[3], "".join(CORPUS * 2)),
    "long vs short": ("".join(CORPUS * 2), CORPUS[0]),
}


@pytest.mark.parametrize("name", PARITY_PAIRS)
@pytest.mark.parametrize("layers", [1, 2])
def test_f1_is_the_code_bert_score_package_f1(tiny_model: str, name: str, layers: int) -> None:
    """The package itself scores the same pair with the same tiny model: the F1s agree."""
    package = pytest.importorskip("code_bert_score", reason="code-bert-score not installed (requirements-extras.txt)")
    candidate, reference = PARITY_PAIRS[name]
    _, _, f1, _ = package.score([candidate], [reference], model_type=tiny_model, num_layers=layers, device="cpu")
    ours = metric_codebert.code_bert_f1(tiny_model, layers)(candidate, reference)
    assert ours == pytest.approx(float(f1[0]), abs=1e-5)
