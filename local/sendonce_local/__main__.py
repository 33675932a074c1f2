import sys

from .cli.command import main

sys.exit(main())
