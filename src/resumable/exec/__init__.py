"""The streaming core: split a stream into statements, rewrite their awaits, run them.

No I/O and no store here: the durability layer plugs in through the await hook
(:class:`resumable.exec.hooks.HookBase`) and the executor's statement observer.
"""
