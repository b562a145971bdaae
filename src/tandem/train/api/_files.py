"""Old name of ``tandem.train.api.files``; other layers import the public name."""

from __future__ import annotations

from tandem.train.api.files import join_path, make_dirs, read_file, remove_dir, write_file

__all__ = ["join_path", "make_dirs", "read_file", "remove_dir", "write_file"]
