"""CodeBERTScore with a tiny RoBERTa and tokenizer built here from a config (no download)."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.metrics_helpers import MODEL, passed, write_dataset, write_result
import metric_codebert
from optional_extras import ExtraUnavailable

CORPUS = [
    "def add ( a , b ) : return a + b",
    "class Model : def forward ( self , x ) : return self . linear ( x )",
    "import torch x = torch . zeros ( 3 ) y = x . sum ( )",
    "for i in range ( 10 ) : total += values [ i ] * weight",
]
REFERENCE = "class Model : def forward ( self , x ) : return self . linear ( x )"
CLOSE = "class Model : def forward ( self , x ) : return self . linear ( x ) + 1"
DIFFERENT = "import torch x = torch . zeros ( 3 ) y = x . sum ( )"


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> str:
    """A 2-layer RoBERTa with a 16-token window, so long inputs exercise the windowing."""
    pytest.importorskip("transformers", reason="optional extra transformers not installed")
    torch = pytest.importorskip("torch", reason="optional extra torch not installed")
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, RobertaConfig, RobertaModel

    folder = tmp_path_factory.mktemp("tiny_codebert")
    tokenizer = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.train_from_iterator(CORPUS, trainers.WordLevelTrainer(special_tokens=["<pad>", "<s>", "</s>", "<unk>"]))
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token="<pad>", cls_token="<s>", sep_token="</s>",
                            unk_token="<unk>", model_max_length=16).save_pretrained(folder)
    config = RobertaConfig(vocab_size=tokenizer.get_vocab_size(), hidden_size=32, num_hidden_layers=2,
                           num_attention_heads=2, intermediate_size=64, max_position_embeddings=18,
                           pad_token_id=0, bos_token_id=1, eos_token_id=2)
    torch.manual_seed(0)
    RobertaModel(config).save_pretrained(folder)
    return str(folder)


@pytest.fixture(autouse=True)
def offline(monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv(metric_codebert.ENV_MODEL, raising=False)
    monkeypatch.delenv(metric_codebert.ENV_LAYERS, raising=False)


@pytest.mark.parametrize("n_tokens, size", [(5, 8), (8, 8), (9, 8), (37, 8), (100, 12), (1000, 510)])
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


def test_long_files_are_scored_whole(tiny_model: str) -> None:
    f1 = metric_codebert.code_bert_f1(tiny_model, 1)
    long_reference = " ".join(CORPUS * 3)
    assert f1(long_reference, long_reference) == pytest.approx(1.0, abs=1e-5)
    assert f1(" ".join(CORPUS[:2] * 3), long_reference) < 1.0


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
    with pytest.raises(ExtraUnavailable, match=r"num_layers 5 is outside 1..2"):
        metric_codebert.code_bert_f1(tiny_model, 5)
