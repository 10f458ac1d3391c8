"""Visit a batch of queue messages: each URL fetched, its result made, the batch's writes, what a fetcher keeps."""
