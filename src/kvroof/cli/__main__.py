import sys

from kvroof.cli import main

sys.exit(main())
