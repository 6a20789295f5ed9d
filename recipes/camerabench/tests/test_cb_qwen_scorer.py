"""Script 1's scorer on CPU with the tiny Qwen2.5-VL test double (real loading, prompt, probabilities).

Skipped where transformers 4.49 is not installed (the recipe image has it; see README, "Tests").
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

pytest.importorskip("transformers", minversion="4.49.0")
pytest.importorskip("decord")

from pinbench_recipes.camerabench import frames  # noqa: E402
from pinbench_recipes.camerabench import qwen_scorer as qs  # noqa: E402

EXPECTED_PROMPT = (
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    "<|im_start|>user\n<|vision_start|><|video_pad|><|vision_end|>"
    "Does the camera move upward? Please only answer Yes or No.<|im_end|>\n"
    "<|im_start|>assistant\n"
)


@pytest.fixture(scope="module")
def scorer(tiny_qwen: tuple[Path, Path]) -> qs.QwenCameraScorer:
    weights, processor = tiny_qwen
    return qs.QwenCameraScorer(qs.ScorerSettings(weights, processor, attn_implementation="eager",
                                                 device="cpu", dtype="float32"))


@pytest.fixture
def video(bit_video: Callable[..., Path]) -> Path:
    return bit_video("clip", 8, 8.0)


def test_prompt_has_qwens_default_system_prompt_video_first_and_the_suffix(scorer, video: Path) -> None:
    text = qs.QUESTION_TEMPLATE.format("Does the camera move upward?")
    assert scorer.prompt(video, text) == EXPECTED_PROMPT


def test_video_element_is_t2v_metrics_3(video: Path) -> None:
    assert qs.video_element(video) == {"type": "video", "video": str(video), "max_pixels": 151200, "fps": 8.0}


def test_answer_tokens_are_the_first_token_of_each_answer(scorer) -> None:
    tokenizer = scorer.processor.tokenizer
    assert scorer.answer_ids == {"Yes": tokenizer.encode("Yes")[0], "No": tokenizer.encode("No")[0]}
    assert scorer.answer_ids["Yes"] != scorer.answer_ids["No"]


def test_probabilities_are_the_processed_first_step_softmax(scorer, video: Path) -> None:
    import torch

    out = scorer.answer_probabilities(video, "Does the camera move upward?")
    inputs, _ = scorer._inputs(video, qs.QUESTION_TEMPLATE.format("Does the camera move upward?"))
    with torch.no_grad():
        logits = scorer.model(**inputs).logits[0, -1].float()
    # the test double's generation_config has repetition_penalty 1.05: generate applies it to every token
    # already in the prompt ("Yes" and "No" are), dividing positive logits and multiplying negative ones
    penalty = scorer.model.generation_config.repetition_penalty
    seen = torch.unique(inputs["input_ids"][0])
    logits[seen] = torch.where(logits[seen] > 0, logits[seen] / penalty, logits[seen] * penalty)
    probs = torch.softmax(logits, dim=-1)
    assert out["p_yes"] == pytest.approx(probs[scorer.answer_ids["Yes"]].item(), rel=1e-5)
    assert out["p_no"] == pytest.approx(probs[scorer.answer_ids["No"]].item(), rel=1e-5)
    assert out["p_yes"] + out["p_no"] < 1.0  # the full vocabulary, not a yes/no renormalisation


def test_one_pass_gives_what_two_upstream_passes_give(scorer, video: Path) -> None:
    import torch

    both = scorer.answer_probabilities(video, "Is the camera still?")
    inputs, _ = scorer._inputs(video, qs.QUESTION_TEMPLATE.format("Is the camera still?"))
    for answer, key in (("Yes", "p_yes"), ("No", "p_no")):  # upstream: a separate generate per answer
        with torch.inference_mode():
            out = scorer.model.generate(**inputs, max_new_tokens=1, do_sample=False, output_scores=True,
                                        return_dict_in_generate=True)
        alone = torch.nn.functional.softmax(out.scores[0], dim=-1)[0, scorer.answer_ids[answer]].item()
        assert both[key] == alone


def test_scores_are_deterministic_and_record_the_sampling(scorer, video: Path) -> None:
    a = scorer.answer_probabilities(video, "Does the camera pan left?")
    b = scorer.answer_probabilities(video, "Does the camera pan left?")
    assert a == b
    assert a["n_frames"] == 8 and a["frame_size"] == [392, 280] and a["video_fps"] == 8.0
    assert a["second_per_grid_ts"] == [1.0]  # t2v_metrics 3.0: processor default of 2 fps, 2 frames per grid


def test_sampled_processor_fps_is_the_31_behaviour(tiny_qwen, video: Path) -> None:
    weights, processor = tiny_qwen
    scorer = qs.QwenCameraScorer(qs.ScorerSettings(weights, processor, attn_implementation="eager", device="cpu",
                                                   dtype="float32", processor_fps="sampled"))
    out = scorer.answer_probabilities(video, "Does the camera pan left?")
    assert out["second_per_grid_ts"] == [pytest.approx(2 / 8.0)]
    assert scorer.describe()["processor_fps"] == "sampled"


def test_each_video_is_decoded_once(scorer, video: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    original = scorer._vp.process_vision_info
    monkeypatch.setattr(scorer._vp, "process_vision_info", lambda *a, **k: calls.append(1) or original(*a, **k))
    scorer._videos.clear()
    for question in ("Does the camera pan left?", "Does the camera pan right?", "Is the camera still?"):
        scorer.answer_probabilities(video, question)
    assert len(calls) == 1


def test_caption_is_generated_and_reproducible(scorer, video: Path) -> None:
    first = scorer.caption(video, "Describe the camera movement in this video.", seed=7)
    again = scorer.caption(video, "Describe the camera movement in this video.", seed=7)
    assert first == again
    assert 1 <= first["n_new_tokens"] <= qs.CAPTION_MAX_NEW_TOKENS
    assert first["caption"] == first["caption"].strip()


def test_describe_records_generation_config_and_versions(scorer) -> None:
    info = scorer.describe()
    assert info["generation_config"]["repetition_penalty"] == 1.05
    assert info["versions"] == qs.PINNED_VERSIONS
    assert info["video_reader"] == "decord"
    assert info["answer_token_ids"] == scorer.answer_ids


def test_a_fallback_to_another_reader_is_refused(scorer, video: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(ele):
        raise RuntimeError("decord cannot read this")

    def other_reader(ele):
        import torch
        return torch.zeros(8, 3, 48, 64, dtype=torch.uint8), 8.0

    monkeypatch.setitem(scorer._vp.VIDEO_READER_BACKENDS, "decord", broken)
    monkeypatch.setitem(scorer._vp.VIDEO_READER_BACKENDS, "torchvision", other_reader)
    scorer._videos.clear()
    with pytest.raises(qs.ScorerError, match="fell back to torchvision"):
        scorer.answer_probabilities(video, "Is the camera still?")


def test_frames_that_break_the_pinned_rule_are_refused(scorer, video: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(frames, "sampled_frame_count", lambda total, fps: 6)
    scorer._videos.clear()
    with pytest.raises(qs.ScorerError, match="the pinned rule gives 6"):
        scorer.decode_video(video)


def test_pinned_versions_and_settings_are_enforced(tiny_qwen) -> None:
    with pytest.raises(qs.ScorerError, match=r"transformers 4\.50\.0 \(pinned 4\.49\.0\)"):
        qs.check_versions({**qs.PINNED_VERSIONS, "transformers": "4.50.0"})
    with pytest.raises(qs.ScorerError, match="qwen-vl-utils None"):
        qs.check_versions({**qs.PINNED_VERSIONS, "qwen-vl-utils": None})
    with pytest.raises(qs.ScorerError, match="processor_fps"):
        qs.ScorerSettings(Path("w"), Path("p"), processor_fps="8")
    with pytest.raises(qs.ScorerError, match="attn_implementation"):
        qs.ScorerSettings(Path("w"), Path("p"), attn_implementation="flash")
    weights, _ = tiny_qwen
    with pytest.raises(qs.ScorerError, match="processor directory not found"):
        qs.QwenCameraScorer(qs.ScorerSettings(weights, weights.parent / "absent", attn_implementation="eager",
                                              device="cpu"))


def test_other_reader_settings_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(qs.READER_ENV, "torchvision")
    with pytest.raises(qs.ScorerError, match="decord only"):
        qs.vision_process()
    monkeypatch.setenv(qs.READER_ENV, "decord")
    monkeypatch.setenv("VIDEO_MAX_PIXELS", "1000")
    with pytest.raises(qs.ScorerError, match="VIDEO_MAX_PIXELS"):
        qs.vision_process()
