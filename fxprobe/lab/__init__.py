"""The lab: a miniature NVMe-oF deployment (array + hosts) under QEMU, or natively with the modules.

Use ``fxprobe.lab.vm.Lab`` (``Lab.load(name)``, ``Lab.up(LabSpec(...))``); see its module docstring.
"""
