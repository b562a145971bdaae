"""``ray.train.v2.api.*`` paths (the ones Ray's docs and API reference use), re-exported."""
