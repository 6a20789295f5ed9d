"""Script 1 with Qwen2.5-VL: t2v_metrics 3.0 semantics in a small scorer of our own.

What t2v_metrics 3.0 (``t2v_metrics/models/vqascore_models/qwen2vl_model.py`` at 7c06208) does, and
this scorer repeats:

* weights from the checkpoint (base Instruct or the camera-motion SFT), processor and tokenizer always
  from the base Instruct repo; bfloat16; ``attn_implementation`` flash_attention_2 upstream;
* one user turn: the video (``fps`` 8.0, ``max_pixels`` 151,200) then the text; the chat template adds
  Qwen's default system prompt ("You are a helpful assistant.") and the generation prompt;
* frames through ``qwen_vl_utils.process_vision_info`` with the decord reader (forced here with
  FORCE_QWENVL_VIDEO_READER; a fallback to another reader fails the sample instead of changing the frames);
* the processor is called without ``fps``, so transformers 4.49 assumes 2 fps and sets
  ``second_per_grid_ts`` to 1.0 although frames were sampled at about 8 fps (3.1 passes the sampled
  rate). ``processor_fps="sampled"`` gives the 3.1 behaviour for comparison; every result records both;
* a yes/no score is ``softmax(scores[0])[token]`` of ``generate(max_new_tokens=1, do_sample=False,
  output_scores=True)``: the first generation step's processed logits (the checkpoint's repetition
  penalty, if any, applies), over the full vocabulary, at the first token of "Yes" / "No";
* a caption is ``generate(max_new_tokens=256)`` under the checkpoint's own generation_config, decoded
  without special tokens and stripped.

Upstream runs the "Yes" and the "No" pass of a VQA combination separately on identical inputs; this
scorer reads both probabilities from the same softmax (one pass instead of two, same numbers).
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pinbench_recipes.camerabench import frames

QUESTION_TEMPLATE = "{} Please only answer Yes or No."
ANSWERS = ("Yes", "No")
CAPTION_MAX_NEW_TOKENS = 256
READER_ENV = "FORCE_QWENVL_VIDEO_READER"
READER = "decord"
PINNED_VERSIONS = {"transformers": "4.49.0", "qwen-vl-utils": "0.0.10", "decord": "0.6.0"}
PROCESSOR_FPS = ("default", "sampled")
ATTENTION = ("flash_attention_2", "sdpa", "eager")
_FALLBACK_MARK = "use torchvision as default"


class ScorerError(RuntimeError):
    """The scorer cannot run as pinned (wrong library version, reader, or settings); one line."""


def video_element(path: Path | str) -> dict[str, Any]:
    """The video entry t2v_metrics 3.0 builds for a file path."""
    return {"type": "video", "video": str(path), "max_pixels": frames.MAX_PIXELS, "fps": frames.SAMPLE_FPS}


def messages(video: Path | str, text: str) -> list[dict[str, Any]]:
    """One user turn, video first, no system message (the chat template adds Qwen's default one)."""
    return [{"role": "user", "content": [video_element(video), {"type": "text", "text": text}]}]


def check_versions(versions: Mapping[str, str | None] | None = None) -> dict[str, str | None]:
    """The installed versions of the pinned libraries; ScorerError naming any that differs."""
    found = dict(versions) if versions is not None else {name: _version(name) for name in PINNED_VERSIONS}
    wrong = [f"{name} {found.get(name)} (pinned {pinned})" for name, pinned in PINNED_VERSIONS.items()
             if found.get(name) != pinned]
    if wrong:
        raise ScorerError(f"Script 1 needs the pinned libraries (the recipe image has them): {', '.join(wrong)}")
    return found


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def vision_process() -> Any:
    """qwen_vl_utils.vision_process with the decord reader forced; ScorerError if that cannot hold."""
    current = os.environ.setdefault(READER_ENV, READER)
    if current != READER:
        raise ScorerError(f"{READER_ENV}={current}: this recipe reads videos with {READER} only")
    if os.environ.get("VIDEO_MAX_PIXELS"):
        raise ScorerError("VIDEO_MAX_PIXELS is set; it changes qwen-vl-utils' pixel budget, unset it")
    from qwen_vl_utils import vision_process as vp

    if vp.FORCE_QWENVL_VIDEO_READER != READER or vp.get_video_reader_backend() != READER:
        raise ScorerError(f"qwen_vl_utils was imported before {READER_ENV} was set (it read "
                          f"{vp.FORCE_QWENVL_VIDEO_READER!r}); import this module first")
    if vp.VIDEO_TOTAL_PIXELS != frames.VIDEO_TOTAL_PIXELS:
        raise ScorerError(f"qwen_vl_utils VIDEO_TOTAL_PIXELS is {vp.VIDEO_TOTAL_PIXELS}, expected "
                          f"{frames.VIDEO_TOTAL_PIXELS}")
    return vp


class _FallbackWatch(logging.Handler):
    """Collects qwen-vl-utils' warning that it fell back from decord to torchvision."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if _FALLBACK_MARK in message:
            self.messages.append(message)


@dataclass(frozen=True)
class ScorerSettings:
    weights_dir: Path  # the checkpoint: base Instruct or the SFT
    processor_dir: Path  # always the base Instruct repo
    attn_implementation: str = "flash_attention_2"
    device: str = "auto"  # "auto" (device_map="auto", as upstream), "cpu" or "cuda[:N]"
    dtype: str = "bfloat16"
    processor_fps: str = "default"  # "default": t2v_metrics 3.0; "sampled": 3.1
    video_cache: int = 4  # decoded videos kept (binary tasks are ordered so one video's questions follow)

    def __post_init__(self) -> None:
        if self.attn_implementation not in ATTENTION:
            raise ScorerError(f"attn_implementation {self.attn_implementation!r} is not one of {ATTENTION}")
        if self.processor_fps not in PROCESSOR_FPS:
            raise ScorerError(f"processor_fps {self.processor_fps!r} is not one of {PROCESSOR_FPS}")
        if self.dtype not in ("bfloat16", "float32"):
            raise ScorerError(f"dtype {self.dtype!r} is not bfloat16 or float32")


class QwenCameraScorer:
    """Loads the model once; scores (video, question) yes/no probabilities and generates captions."""

    def __init__(self, settings: ScorerSettings, *, versions: Mapping[str, str | None] | None = None) -> None:
        import torch
        from transformers import AutoProcessor, Qwen2_5_VLForConditionalGeneration

        self.settings = settings
        self.versions = check_versions(versions)
        self._vp = vision_process()
        for what, folder in (("weights", settings.weights_dir), ("processor", settings.processor_dir)):
            if not Path(folder).is_dir():
                raise ScorerError(f"{folder}: {what} directory not found")
        self.processor = AutoProcessor.from_pretrained(settings.processor_dir, local_files_only=True)
        dtype = getattr(torch, settings.dtype)
        device_map = "auto" if settings.device == "auto" else None
        self.model = Qwen2_5_VLForConditionalGeneration.from_pretrained(
            settings.weights_dir, torch_dtype=dtype, attn_implementation=settings.attn_implementation,
            device_map=device_map, local_files_only=True, use_safetensors=True)
        if device_map is None:
            self.model.to(settings.device)
        self.model.eval()
        self.device = next(self.model.parameters()).device
        tokenizer = self.processor.tokenizer
        # t2v_metrics: tokenizer.encode(answer)[0], the first token of the answer text
        self.answer_ids = {answer: tokenizer.encode(answer)[0] for answer in ANSWERS}
        self._videos: OrderedDict[tuple[str, int, int], tuple[Any, dict[str, Any]]] = OrderedDict()

    def describe(self) -> dict[str, Any]:
        """Everything about the scorer that can move a number; recorded in provenance."""
        return {
            "versions": self.versions,
            "video_reader": self._vp.get_video_reader_backend(),
            "attn_implementation": self.model.config._attn_implementation,
            "dtype": str(self.model.dtype),
            "device": str(self.device),
            "processor_fps": self.settings.processor_fps,
            "answer_token_ids": self.answer_ids,
            "question_template": QUESTION_TEMPLATE,
            "generation_config": self.model.generation_config.to_dict(),
        }

    def prompt(self, video: Path | str, text: str) -> str:
        return self.processor.apply_chat_template(messages(video, text), tokenize=False, add_generation_prompt=True)

    def decode_video(self, path: Path | str) -> tuple[Any, dict[str, Any]]:
        """The frames qwen-vl-utils gives the model for this video (cached), and what was sampled."""
        path = Path(path)
        stat = path.stat()
        key = (str(path), stat.st_size, stat.st_mtime_ns)
        if key in self._videos:
            self._videos.move_to_end(key)
            return self._videos[key]
        watch = _FallbackWatch()
        logger = logging.getLogger(self._vp.__name__)
        logger.addHandler(watch)
        try:
            _, videos, kwargs = self._vp.process_vision_info(messages(path, ""), return_video_kwargs=True)
        finally:
            logger.removeHandler(watch)
        if watch.messages:
            raise ScorerError(f"{path}: decord could not read it and qwen-vl-utils fell back to torchvision "
                              f"({watch.messages[0][:200]}); refusing frames from another reader")
        video = videos[0]
        info = self._check_frames(path, video, float(kwargs["fps"][0]))
        self._videos[key] = (video, info)
        while len(self._videos) > self.settings.video_cache:
            self._videos.popitem(last=False)
        return video, info

    @staticmethod
    def _check_frames(path: Path, video: Any, sample_fps: float) -> dict[str, Any]:
        import decord

        reader = decord.VideoReader(str(path))
        total, video_fps = len(reader), float(reader.get_avg_fps())
        height, width = reader[0].shape[:2]
        n = frames.sampled_frame_count(total, video_fps)
        size = frames.resized_size(height, width, n)
        got_n, _, got_h, got_w = video.shape
        if (got_n, (got_h, got_w)) != (n, size):
            raise ScorerError(f"{path}: qwen-vl-utils sampled {got_n} frames at {got_w}x{got_h}, the pinned "
                              f"rule gives {n} at {size[1]}x{size[0]} (another library version?)")
        return {"video_frames": total, "video_fps": video_fps, "video_size": [width, height],
                "n_frames": n, "frame_size": [size[1], size[0]], "sample_fps": sample_fps}

    def _inputs(self, path: Path | str, text: str) -> tuple[Any, dict[str, Any]]:
        video, info = self.decode_video(path)
        kwargs: dict[str, Any] = {}
        if self.settings.processor_fps == "sampled":
            kwargs["fps"] = [info["sample_fps"]]
        inputs = self.processor(text=[self.prompt(path, text)], images=None, videos=[video], padding=True,
                                return_tensors="pt", **kwargs)
        info = {**info, "second_per_grid_ts": [float(t) for t in inputs["second_per_grid_ts"]]}
        return inputs.to(self.device), info

    def answer_probabilities(self, path: Path | str, question: str) -> dict[str, Any]:
        """P("Yes") and P("No") (first tokens) for the templated question about the video."""
        import torch

        inputs, info = self._inputs(path, QUESTION_TEMPLATE.format(question))
        with torch.inference_mode():
            out = self.model.generate(**inputs, max_new_tokens=1, do_sample=False, output_scores=True,
                                      return_dict_in_generate=True)
        probs = torch.nn.functional.softmax(out.scores[0], dim=-1)
        return {"p_yes": probs[0, self.answer_ids["Yes"]].item(), "p_no": probs[0, self.answer_ids["No"]].item(),
                **info}

    def caption(self, path: Path | str, question: str, seed: int) -> dict[str, Any]:
        """The generated caption (question sent as is, no template); ``seed`` fixes any sampling."""
        import torch

        inputs, info = self._inputs(path, question)
        torch.manual_seed(seed)
        with torch.inference_mode():
            generated = self.model.generate(**inputs, max_new_tokens=CAPTION_MAX_NEW_TOKENS)
        new_tokens = generated[:, inputs["input_ids"].shape[1]:]
        text = self.processor.batch_decode(new_tokens, skip_special_tokens=True,
                                           clean_up_tokenization_spaces=False)[0].strip()
        return {"caption": text, "n_new_tokens": int(new_tokens.shape[1]), "seed": seed, **info}
