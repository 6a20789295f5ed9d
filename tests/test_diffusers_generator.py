"""The shipped ``diffusers`` generator (#29) through its real loading code, on CPU, on tiny random weights written here.

A TextToVideoSDPipeline of seeded random weights (UNet3DConditionModel, AutoencoderKL, a 2-layer CLIPTextModel, a
CLIPTokenizer of a byte-level vocabulary written here, DDIMScheduler) is saved with ``save_pretrained``; the adapter
is built as ``--generator diffusers -g model=DIR -g weights_sha256=HEX -g steps=2`` builds it (options as strings)
and driven by the run's generation step (its worker process) on a toy run. What it makes must pass the rollout
check and be exactly what the same pipeline, called directly here, makes for that prompt, seed and settings.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import diffusers
import numpy as np
import pytest
import torch
from toy_recipe import toy_recipe
from transformers import CLIPTextConfig, CLIPTextModel, CLIPTokenizer
from transformers.models.clip.tokenization_clip import bytes_to_unicode

from pinbench.core.generation import Conditioning, Prompt, Request, RequestError, refuse
from pinbench.core.run import Run
from pinbench.core.rundir import claim_run_dir
from pinbench.media.video import read_video
from pinbench.ops import generators
from pinbench.ops.generation import Generating, GeneratorSpec, build, check_rollout
from pinbench.ops.generators import Diffusers, tree_sha256

SEED = str(2**63 - 1)   # a 63-bit seed: through a float it would become 2**63, another noise
PROMPT = "a red ball rolls behind a box"
SIZE = dict(frames=8, fps=8.0, width=32, height=32)
TARGET = "pinbench.ops.generators:diffusers"


def _pipeline(folder: Path) -> diffusers.TextToVideoSDPipeline:
    """A tiny text-to-video pipeline with seeded random weights (its tokenizer's files written under ``folder``)."""
    chars = list(bytes_to_unicode().values())
    vocab = {token: i for i, token in enumerate(["<|startoftext|>", "<|endoftext|>", *chars,
                                                 *(c + "</w>" for c in chars)])}
    folder.mkdir(parents=True)
    (folder / "vocab.json").write_text(json.dumps(vocab))
    (folder / "merges.txt").write_text("#version: 0.2\n")
    tokenizer = CLIPTokenizer(str(folder / "vocab.json"), str(folder / "merges.txt"), model_max_length=16)
    torch.manual_seed(0)
    unet = diffusers.UNet3DConditionModel(
        block_out_channels=(8, 8), layers_per_block=1, sample_size=32, in_channels=4, out_channels=4,
        down_block_types=("CrossAttnDownBlock3D", "DownBlock3D"), up_block_types=("UpBlock3D", "CrossAttnUpBlock3D"),
        cross_attention_dim=8, attention_head_dim=4, norm_num_groups=2)
    vae = diffusers.AutoencoderKL(block_out_channels=(8,), in_channels=3, out_channels=3, latent_channels=4,
                                  down_block_types=["DownEncoderBlock2D"], up_block_types=["UpDecoderBlock2D"],
                                  sample_size=32, norm_num_groups=2)
    text_encoder = CLIPTextModel(CLIPTextConfig(
        vocab_size=len(vocab), hidden_size=8, intermediate_size=16, num_attention_heads=2, num_hidden_layers=2,
        max_position_embeddings=16, projection_dim=8, bos_token_id=0, eos_token_id=1, pad_token_id=1))
    scheduler = diffusers.DDIMScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="linear",
                                        clip_sample=False, set_alpha_to_one=False)
    pipeline = diffusers.TextToVideoSDPipeline(vae=vae, text_encoder=text_encoder, tokenizer=tokenizer, unet=unet,
                                               scheduler=scheduler)
    pipeline.set_progress_bar_config(disable=True)
    return pipeline


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, diffusers.TextToVideoSDPipeline]:
    """The pipeline in memory, and the folder ``save_pretrained`` wrote it to."""
    root = tmp_path_factory.mktemp("diffusers")
    pipeline = _pipeline(root / "words")
    pipeline.save_pretrained(root / "model")
    return root / "model", pipeline


@pytest.fixture
def model(written, tmp_path: Path) -> Path:
    """This test's own copy of the written folder."""
    return Path(shutil.copytree(written[0], tmp_path / "model"))


def _options(folder: Path, digest: str) -> dict[str, str]:
    return {"model": str(folder), "weights_sha256": digest, "steps": "2", "guidance": "7.5"}


def _request(sid: str = "scene_a", *, prompts: tuple[Prompt, ...] = (Prompt(PROMPT),), kind: str = "prompt-schedule",
             conditioning: tuple[Conditioning, ...] = (), seed: str = SEED) -> Request:
    return Request(id=sid, kind=kind, recipe="toy-bench", output=f"{sid}.mp4", seed=seed, prompts=prompts,
                   conditioning=conditioning, **SIZE)


def _toy_run(tmp_path: Path) -> Run:
    recipe = toy_recipe(tmp_path / "recipes")
    return Run(recipe, recipe.config("Toy-Nano", out_dir=tmp_path / "run", env={}))


def test_the_generation_step_loads_the_pinned_folder_and_its_rollout_passes_the_check(written, tmp_path: Path) -> None:
    folder, pipeline = written
    run, request = _toy_run(tmp_path), _request()
    step = Generating(GeneratorSpec("diffusers", _options(folder, tree_sha256(folder))), run.recipe)
    with claim_run_dir(run.cfg, env={}):
        rollouts = step.generate(run, [request], "rollouts")
    assert run.generation_failures == {}
    rollout = rollouts / request.output
    assert check_rollout(request, rollout) == []
    assert run.generation is not None and run.generation.signature is not None
    assert run.generation.signature.weights == f"sha256:{tree_sha256(folder)}"
    # what the pipeline in memory makes, called here with the same prompt, seed and settings (its own PIL output)
    frames = pipeline(PROMPT, num_frames=8, height=32, width=32, num_inference_steps=2, guidance_scale=7.5,
                      output_type="pil", generator=torch.Generator("cpu").manual_seed(2**63 - 1)).frames[0]
    expected = np.stack([np.asarray(frame) for frame in frames])
    assert expected.std() > 10   # not a flat video: another seed or prompt would show
    np.testing.assert_array_equal(read_video(rollout, backend="pyav").frames, expected)


def test_a_wrong_digest_is_refused_in_one_line_before_anything_is_loaded(model: Path, monkeypatch) -> None:
    def loaded(*args, **kwargs):   # test double: loading must not be reached
        raise AssertionError("from_pretrained was called")

    hashed = []
    monkeypatch.setattr(diffusers.DiffusionPipeline, "from_pretrained", loaded)
    monkeypatch.setattr(generators, "tree_sha256", lambda folder: hashed.append(folder) or tree_sha256(folder))
    adapter = build(TARGET, _options(model, "0" * 64))
    assert adapter.signature().weights == "sha256:" + "0" * 64 and hashed == []   # the signature hashes nothing
    for _ in range(2):
        with pytest.raises(ValueError) as refused:
            adapter.generate(_request(), model.parent / "out.mp4")
        assert str(refused.value) == (f"{model}: its files hash to {tree_sha256(model)}, not the pinned "
                                      f"-g weights_sha256={'0' * 64} (a file added, changed or removed)")
    assert len(hashed) == 1 and not (model.parent / "out.mp4").exists()   # refused again without hashing again


def test_pickled_weights_are_never_loaded(written, tmp_path: Path) -> None:
    folder = tmp_path / "pickled"
    written[1].save_pretrained(folder, safe_serialization=False)   # torch.save'd .bin files, no .safetensors
    assert list(folder.rglob("*.bin")) and not list(folder.rglob("*.safetensors"))
    adapter = Diffusers(**_options(folder, tree_sha256(folder)))
    for _ in range(2):   # and again, from what the first attempt found
        with pytest.raises(OSError, match=r"no file named \S+\.safetensors"):
            adapter.generate(_request(), tmp_path / "out.mp4")


@pytest.mark.parametrize(("named", "message"), [
    ("StableDiffusionPipeline", "not a text-to-video pipeline (its call takes no num_frames)"),
    ("ModelMixin", "not a diffusers pipeline"),
    ("utils", "not a diffusers pipeline"),
], ids=["image-pipeline", "model-class", "module"])
def test_a_pipeline_class_it_cannot_drive_is_refused_before_loading(model: Path, named, message,
                                                                    monkeypatch) -> None:
    index = model / "model_index.json"
    index.write_text(index.read_text().replace('"TextToVideoSDPipeline"', f'"{named}"'))
    monkeypatch.setattr(diffusers.DiffusionPipeline, "from_pretrained", lambda *a, **k: pytest.fail("loaded"))
    adapter = Diffusers(**{**_options(model, tree_sha256(model)), "pipeline": named})
    with pytest.raises(ValueError, match=rf"^-g pipeline={named}: {re.escape(message)}$"):
        adapter.generate(_request(), model.parent / "out.mp4")


def _add(model: Path) -> None:
    (model / "unet" / "extra.safetensors").write_bytes(b"x")


def _change(model: Path) -> None:
    config = model / "scheduler" / "scheduler_config.json"
    config.write_text(config.read_text().replace('"steps_offset": 0', '"steps_offset": 1'))


def _remove(model: Path) -> None:
    (model / "tokenizer" / "merges.txt").unlink()


def _rename(model: Path) -> None:
    (model / "vae" / "config.json").rename(model / "vae" / "config.json.orig")


@pytest.mark.parametrize("tamper", [_add, _change, _remove, _rename])
def test_a_folder_changed_after_pinning_is_refused(model: Path, tamper, monkeypatch) -> None:
    pinned = tree_sha256(model)
    tamper(model)
    assert tree_sha256(model) != pinned
    monkeypatch.setattr(diffusers.DiffusionPipeline, "from_pretrained", lambda *a, **k: pytest.fail("loaded"))
    with pytest.raises(ValueError, match=rf"^{model}: its files hash to [0-9a-f]{{64}}, not the pinned "):
        Diffusers(**_options(model, pinned)).generate(_request(), model.parent / "out.mp4")


def test_a_download_s_bookkeeping_is_not_pinned_but_every_other_file_is(model: Path) -> None:
    pinned = tree_sha256(model)
    (model / ".cache" / "huggingface" / "download").mkdir(parents=True)
    (model / ".cache" / "huggingface" / "download" / "model_index.json.metadata").write_text("abc\n1765000000.0\n")
    assert tree_sha256(model) == pinned
    (model / ".cache" / "other").write_text("x")
    assert tree_sha256(model) != pinned


def test_a_file_link_is_hashed_through_and_a_folder_link_fifo_or_dangling_link_refused(model: Path) -> None:
    pinned = tree_sha256(model)
    weights = model / "vae" / "diffusion_pytorch_model.safetensors"
    blob = model.parent / "blob"
    weights.rename(blob)
    weights.symlink_to(blob)   # a Hugging Face cache snapshot: a link per file
    assert tree_sha256(model) == pinned
    (model / "linked").symlink_to(model / "unet", target_is_directory=True)
    with pytest.raises(ValueError, match=rf"^{model / 'linked'}: a symlink to a folder"):
        tree_sha256(model)
    (model / "linked").unlink()
    os.mkfifo(model / "unet" / "pipe")
    with pytest.raises(ValueError, match=rf"^{model / 'unet' / 'pipe'}: a FIFO"):
        tree_sha256(model)
    (model / "unet" / "pipe").unlink()
    (model / "gone").symlink_to(model.parent / "nowhere")
    with pytest.raises(ValueError, match=rf"^{model / 'gone'}: a dangling symlink \(to "):
        tree_sha256(model)
    with pytest.raises(ValueError, match=rf"^{model / 'absent'}: unreadable \(No such file or directory\)"):
        tree_sha256(model / "absent")   # a folder it cannot list is never an empty digest


FOUR = tuple(Prompt(text, start) for text, start in (("a cat", 0.0), ("it leaves", 4.0), ("empty", 8.0),
                                                      ("it returns", 12.0)))
FILE = "0" * 64
CANNOT = [
    (_request("t2v", prompts=FOUR), "prompt-schedule", "4-prompt schedule (capability prompt_schedule)"),
    (_request("i2v", kind="image-camera", conditioning=(Conditioning("initial_frame", "a.png", FILE),
                                                        Conditioning("trajectory", "a.npz", FILE))),
     "image-camera", "it does not generate image-camera requests"),
    (_request("mind", kind="context-actions", prompts=(), conditioning=(Conditioning("context", "gt.mp4", FILE,
                                                                                     (0, 4)),)),
     "context-actions", "it does not generate context-actions requests"),
    (_request("pai", kind="control-video", conditioning=(Conditioning("control", "edge.mp4", FILE),)),
     "control-video", "it does not generate control-video requests"),
]


@pytest.mark.parametrize(("request_", "kind", "missing"), CANNOT, ids=[c[1] for c in CANNOT])
def test_a_request_it_cannot_honour_is_refused_naming_the_kind_and_the_capability(request_, kind, missing) -> None:
    with pytest.raises(RequestError) as refused:
        refuse(Diffusers.capabilities, [_request("plain"), request_], "diffusers")
    message = str(refused.value)
    assert "\n" not in message and message.startswith(f"generator diffusers cannot honour {kind} requests "
                                                      f"(e.g. {request_.id}): ")
    assert missing in message


def test_the_step_refuses_a_prompt_schedule_before_generating_anything(written, tmp_path: Path) -> None:
    folder = written[0]
    run = _toy_run(tmp_path)
    step = Generating(GeneratorSpec("diffusers", _options(folder, tree_sha256(folder))), run.recipe)
    with claim_run_dir(run.cfg, env={}), pytest.raises(RequestError, match=r"cannot honour prompt-schedule requests "
                                                        r"\(e.g. t2v\): it cannot follow a 4-prompt schedule"):
        step.generate(run, [_request("plain"), _request("t2v", prompts=FOUR)], "rollouts")
    assert list((run.out_dir / "rollouts").iterdir()) == []
    assert not (run.out_dir / "generation" / "samples").exists()


@pytest.mark.parametrize(("change", "message"), [
    ({"weights_sha256": "abc"}, "-g weights_sha256= must be the 64-hex digest"),
    ({"steps": "2.5"}, "-g steps=2.5: must be a whole number of 1 or more"),
    ({"steps": "0"}, "-g steps=0: must be a whole number of 1 or more"),
    ({"guidance": "nan"}, "-g guidance=nan: must be a finite number"),
    ({"device": "tpu"}, "-g device=tpu: must be cpu, cuda or cuda:N"),
    ({"pipeline": "StableDiffusionPipeline"}, "model_index.json: a TextToVideoSDPipeline folder, not a "
                                              "StableDiffusionPipeline one"),
], ids=["weights", "steps-fraction", "steps-zero", "guidance-nan", "device", "pipeline"])
def test_options_it_cannot_use_are_refused_when_it_is_built(model: Path, change, message) -> None:
    with pytest.raises(Exception, match="ValueError: .*" + message.replace(".", r"\.").replace("(", r"\(")):
        build(TARGET, {**_options(model, tree_sha256(model)), **change})


@pytest.mark.parametrize(("prompts", "seed", "message"), [
    ((Prompt(PROMPT, 2.0),), SEED, "its one prompt starts at second 2"),
    ((Prompt(PROMPT),), str(2**64), f"seed {2**64} does not fit torch's 64-bit generator"),
    (FOUR, SEED, "it cannot follow a 4-prompt schedule"),
], ids=["late-prompt", "seed-2**64", "schedule"])
def test_what_a_text_to_video_pipeline_cannot_take_is_refused_not_approximated(model, prompts, seed, message,
                                                                              monkeypatch) -> None:
    monkeypatch.setattr(diffusers.DiffusionPipeline, "from_pretrained", lambda *a, **k: pytest.fail("loaded"))
    with pytest.raises(ValueError, match=f"^{message}"):
        Diffusers(**_options(model, tree_sha256(model))).generate(_request(prompts=prompts, seed=seed),
                                                                  model.parent / "out.mp4")


class _Made:
    """Test double: a loaded pipeline that hands back the frames it is given, whatever the request."""

    def __init__(self, frames: np.ndarray) -> None:
        self.frames = frames

    def __call__(self, *args, **kwargs):
        return type("Output", (), {"frames": self.frames[None]})


@pytest.mark.parametrize(("frames", "message"), [
    (np.full((7, 32, 32, 3), 0.5, np.float32), r"float32 frames of shape \(7, 32, 32, 3\), not \(8, 32, 32, 3\)"),
    (np.full((8, 32, 32, 3), 128, np.uint8), "uint8 frames"),
    (np.full((8, 32, 32, 3), np.nan, np.float32), r"pixels outside \[0, 1\] or not finite"),
    (np.full((8, 32, 32, 3), 1.5, np.float32), r"pixels outside \[0, 1\] or not finite"),
], ids=["frame-count", "uint8", "nan", "over-1"])
def test_frames_that_are_not_what_was_asked_are_refused_not_clipped(model: Path, frames, message) -> None:
    adapter = Diffusers(**_options(model, tree_sha256(model)))
    adapter._pipeline = _Made(frames)
    with pytest.raises(ValueError, match=f"^the pipeline made {message}"):
        adapter.generate(_request(), model.parent / "out.mp4")
    assert not (model.parent / "out.mp4").exists()
