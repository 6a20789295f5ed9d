"""Long-sequence dynamic degree recipe: RAFT motion probe over 2 s clips of generated videos."""
