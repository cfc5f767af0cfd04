"""Hot standby: the primary's tick records and full states (:mod:`.state`, sans-I/O), the
authenticated hello (:mod:`.auth`), and the links that carry them (:mod:`.net`: the
primary's hub, the standby's follower)."""
