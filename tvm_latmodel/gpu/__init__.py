"""CUDA measurement without TVM on the GPU machine: :mod:`.bundle` packs
candidates' CUDA source and launches, ``scripts/gpu_timer.py`` times them
there, and :mod:`.importer` writes the results back as a tuning database."""
