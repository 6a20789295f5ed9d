"""CameraBench recipe: camera-motion understanding (Script 1: Qwen2.5-VL scores; Script 2: official metrics)."""
