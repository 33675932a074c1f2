"""The benchmark's scenarios, one module per section of the report (bench/render.py writes them)."""
