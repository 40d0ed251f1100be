package sub

import _ "go.etcd.io/raft/v3/raftpb" // allowed: the fixture's policy reserves raft for sub
