"""Helpers for the CameraBench tests: tiny real videos, a synthetic data set, and a Qwen2.5-VL test double.

The test double is a real ``Qwen2_5_VLForConditionalGeneration`` with a tiny config and seeded random
weights, saved as safetensors, plus a processor directory (a small byte-level BPE tokenizer trained here,
Qwen's image processor settings and the Qwen2.5-VL chat template). The recipe's real loading code reads
both from disk, exactly as it reads the pinned snapshots.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from pinbench_recipes.camerabench.fixture import bit_frames

# The chat template published with Qwen2.5-VL-7B-Instruct (the test double's processor uses it).
QWEN25_VL_CHAT_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}{% if add_vision_id %}Picture {{ image_count.value }}: "
    "{% endif %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}{% set video_count.value = video_count.value + 1 %}"
    "{% if add_vision_id %}Video {{ video_count.value }}: {% endif %}<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
                  "<|image_pad|>", "<|video_pad|>"]
_CORPUS = ["Yes", "No", "Yes No", "Please only answer Yes or No.", "Does the camera move upward?",
           "Describe the camera movement in this video.", "The camera pans left while moving forward.",
           "You are a helpful assistant.", "system user assistant"] * 20


@pytest.fixture
def bit_video(tmp_path: Path) -> Callable[..., Path]:
    """Factory: an MP4 of ``n_frames`` index-coded frames at ``fps`` (lossless enough to read back)."""

    from pinbench.media.video import write_video

    def _make(name: str, n_frames: int, fps: float, height: int = 48, width: int = 64) -> Path:
        return write_video(tmp_path / f"{name}.mp4", bit_frames(n_frames, height, width), fps, crf=0)

    return _make


def build_tiny_qwen(root: Path, seed: int = 0) -> tuple[Path, Path]:
    """A tiny Qwen2.5-VL (weights dir, processor dir) with seeded random weights; the test double."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import (
        GenerationConfig,
        Qwen2_5_VLConfig,
        Qwen2_5_VLForConditionalGeneration,
        Qwen2_5_VLProcessor,
        Qwen2TokenizerFast,
        Qwen2VLImageProcessor,
    )

    weights, processor_dir = root / "weights", root / "processor"
    tokenizer_core = Tokenizer(models.BPE())
    tokenizer_core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer_core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tokenizer_core.train_from_iterator(_CORPUS, trainer)
    tokenizer = Qwen2TokenizerFast(tokenizer_object=tokenizer_core, eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>", unk_token=None, bos_token=None)
    image_processor = Qwen2VLImageProcessor(min_pixels=3136, max_pixels=12845056, patch_size=14,
                                            temporal_patch_size=2, merge_size=2)
    processor = Qwen2_5_VLProcessor(image_processor=image_processor, tokenizer=tokenizer,
                                    chat_template=QWEN25_VL_CHAT_TEMPLATE)
    processor.save_pretrained(processor_dir)

    ids = {tok: tokenizer.convert_tokens_to_ids(tok) for tok in SPECIAL_TOKENS}
    config = Qwen2_5_VLConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
        rope_scaling={"type": "mrope", "mrope_section": [1, 1, 2]}, tie_word_embeddings=False,
        vision_config={"depth": 2, "hidden_size": 32, "intermediate_size": 64, "num_heads": 4,
                       "out_hidden_size": 32, "fullatt_block_indexes": [1], "window_size": 56,
                       "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2,
                       "tokens_per_second": 2},
        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"],
        bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"], pad_token_id=ids["<|endoftext|>"])
    torch.manual_seed(seed)
    model = Qwen2_5_VLForConditionalGeneration(config)
    with torch.no_grad():
        for param in model.parameters():
            param.normal_(0.0, 0.2)
    model.generation_config = GenerationConfig(
        bos_token_id=ids["<|endoftext|>"], eos_token_id=[ids["<|im_end|>"], ids["<|endoftext|>"]],
        pad_token_id=ids["<|endoftext|>"], repetition_penalty=1.05, do_sample=False)
    model.save_pretrained(weights, safe_serialization=True)
    (weights / "test_double.json").write_text(json.dumps({"what": "tiny Qwen2.5-VL test double", "seed": seed}))
    return weights, processor_dir


@pytest.fixture(scope="session")
def tiny_qwen(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    pytest.importorskip("transformers", minversion="4.49.0")
    return build_tiny_qwen(tmp_path_factory.mktemp("tiny_qwen"))
