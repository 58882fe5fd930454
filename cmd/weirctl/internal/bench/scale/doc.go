// Package scale is weirctl bench scale: the steps with which
// .ci/bench-scale.sh measures what partitions cost a cluster (create and
// time a topic, wait for its leaders to settle or move, show the leader
// layout, sample broker processes from /proc), and the report that puts
// the runs side by side.
package scale
