"""The one Kubernetes access layer: every read and write of the API goes through `client` (`Kube`,
`BlockingKube`, one `KubeError`), naming its object kind with a `Resource` (`objects`, which also gives
plain-dict access to objects); `informer` lists and watches one resource into a cache (`packed` keeps it as
compact JSON, `slim_json` decodes only the fields it keeps); `health` is the one view of an API outage,
`limits` the client's token buckets and timeouts; `selectors` parses and matches label selectors as the API
server does; `events` posts Kubernetes Events off the hot path. `library` imports the Kubernetes client
library (without google-auth); nothing else imports it."""
