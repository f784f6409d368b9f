"""`tl.extra.libdevice`: the current backend's libdevice, which is NVIDIA's here."""

from tile.language.extra.cuda.libdevice import *  # noqa: F401,F403
from tile.language.extra.cuda.libdevice import FUNCTIONS, __all__  # noqa: F401
