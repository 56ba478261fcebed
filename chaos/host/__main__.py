import sys

from chaos.host.server import main

sys.exit(main())
