"""``python -m rubric_reward.cli``: the ``rubric-reward`` command."""

import sys

from .main import main

sys.exit(main())
