"""The plugin's tests never write to the user's Thork cache: one private cache per run."""

import os
import tempfile

os.environ.setdefault("THORK_CACHE_DIR", tempfile.mkdtemp(prefix="thork-sanitize-test-"))
