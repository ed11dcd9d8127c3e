package api

// The nouns the API carries, declared in the packages named after them,
// under their old names here until every use names its package.

import (
	"shoal/internal/job"
	"shoal/internal/links"
	"shoal/internal/node"
	"shoal/internal/shard"
	"shoal/internal/traffic"
)

type (
	Node        = node.Node
	NodeList    = node.List
	Voters      = node.Voters
	Link        = links.Link
	LinkList    = links.List
	ShardRef    = shard.Ref
	ParityRef   = shard.ParityRef
	ShardInfo   = shard.Info
	ParityInfo  = shard.ParityInfo
	BadShard    = shard.Bad
	ShardIndex  = shard.Index
	Progress    = job.Progress
	RankTraffic = traffic.Report
	PeerTraffic = traffic.PeerReport
)

const (
	ShardBlockSize = shard.BlockSize
	RoleLeader     = node.RoleLeader
	RoleVoter      = node.RoleVoter
	RoleFollower   = node.RoleFollower
)

var (
	Quorum   = node.Quorum
	QuorumOf = node.QuorumOf
)
