"""The replication links (asyncio): the primary's hub and the standby's follower."""
