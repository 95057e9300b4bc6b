"""The walls of the kernel student code runs in: ``sandbox`` is the policy (limits, hidden paths, a uid per
student), ``launcher`` applies it in the kernel's process, forked from a ``zygote``; ``cgroups``, ``processes``,
``kernel_environment`` and ``kernel_stages`` are the pieces they share; ``student_sandbox`` is all a batch holds of
them (one object per student).  Imports only ``course``."""
