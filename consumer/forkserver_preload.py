"""Imported by multiprocessing's forkserver when it starts (``set_forkserver_preload``).

The forkserver is a child of the worker; importing this module there arms the parent-death
signal, so a SIGKILLed worker takes its forkserver along, and with it the pool processes
the forkserver forked (they arm their own in ``die_with_parent``, the pool initializer).
Nothing else imports this module.
"""

from ocrq.shared.lifeline import die_with_parent

die_with_parent()
