"""Data quality for runoff: Great Expectations suites as code, validation of what runs changed.

Great Expectations consults `GX_ANALYTICS_ENABLED`: it is switched off here, before any module of
this package imports GX (the GX project itself is also configured with analytics off).
"""

from __future__ import annotations

import os

os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
