package group

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/weir-broker/weir/log"
)

// The records of KIP-848 (consumer protocol) groups in __consumer_offsets,
// in Apache Kafka 4.1's formats.
//
// A key is the record type as an int16 followed by the key's fields in a
// non-flexible version 0: strings with an int16 length. A value is its
// version as an int16 (always 0: it is the only version Kafka 4.1 has of
// any of these values, and it rejects every other) followed by the fields
// in a flexible version: compact strings, arrays and bytes (an unsigned
// varint of the length plus one, 0 for null), and a section of tagged
// fields closing the value and every struct in it. A tombstone is a key
// with a null value.
//
// Kafka 4.1 writes no partition metadata (type 4) any more; it keeps a
// hash of the subscribed topics' metadata in the group metadata record
// (MetadataHash, a tagged field) instead and deletes a type 4 record it
// finds, so type 4 here is decoded, and only its tombstone encoded.
//
// Strings: Kafka refuses to write or read a string longer than 32767
// bytes (maxRecordString) in these records. The encoders do not check:
// their callers reject such input first (group ids, member ids, client
// ids, regular expressions come from requests whose compact strings can be
// longer); the decoder refuses them as Kafka does.

// Record key types of KIP-848 groups in __consumer_offsets.
const (
	consumerGroupMetadataType          int16 = 3
	consumerGroupPartitionMetadataType int16 = 4
	consumerGroupMemberMetadataType    int16 = 5
	consumerGroupTargetMetadataType    int16 = 6
	consumerGroupTargetMemberType      int16 = 7
	consumerGroupCurrentAssignmentType int16 = 8
	consumerGroupRegexType             int16 = 16
)

// cgValueVersion is the version of every value here.
const cgValueVersion int16 = 0

// maxRecordString is the longest string Kafka reads in these records.
const maxRecordString = 0x7fff

// isConsumerRecordType says whether a key type is one of the above.
func isConsumerRecordType(t int16) bool {
	switch t {
	case consumerGroupMetadataType, consumerGroupPartitionMetadataType,
		consumerGroupMemberMetadataType, consumerGroupTargetMetadataType,
		consumerGroupTargetMemberType, consumerGroupCurrentAssignmentType,
		consumerGroupRegexType:
		return true
	}
	return false
}

// topicPartitions is a topic's partitions in an assignment.
type topicPartitions struct {
	TopicID    [16]byte
	Partitions []int32
}

// cgMetadata is ConsumerGroupMetadataValue (type 3): the group epoch and
// the hash of the subscribed topics' metadata (KIP-1101; tagged field 0,
// written only when not 0).
type cgMetadata struct {
	Epoch        int32
	MetadataHash int64
}

// cgPartitionMetadata is ConsumerGroupPartitionMetadataValue (type 4),
// the subscription metadata of Kafka before 4.1; decoded only.
type cgPartitionMetadata struct {
	Topics []cgTopicMetadata
}

type cgTopicMetadata struct {
	TopicID       [16]byte
	TopicName     string
	NumPartitions int32
	// PartitionMetadata is deprecated in Kafka since 4.0 (empty there).
	PartitionMetadata []cgPartitionRacks
}

type cgPartitionRacks struct {
	Partition int32
	Racks     []string
}

// cgMemberMetadata is ConsumerGroupMemberMetadataValue (type 5).
// Kafka writes SubscribedTopicNames sorted; so does the encoder.
type cgMemberMetadata struct {
	InstanceID, RackID   *string
	ClientID, ClientHost string
	SubscribedTopicNames []string
	SubscribedTopicRegex *string
	RebalanceTimeoutMs   int32
	ServerAssignor       *string
	// Classic is tagged field 0, nil unless the member uses the classic
	// protocol. Kafka's generated code takes an empty struct (session
	// timeout 0, no protocols) as the field's default: nil is written
	// explicitly (as a null), the empty struct is left out, and a value
	// without the field decodes as the empty struct. The codec does the
	// same.
	Classic *cgClassicMemberMetadata
}

type cgClassicMemberMetadata struct {
	SessionTimeoutMs   int32
	SupportedProtocols []cgClassicProtocol
}

type cgClassicProtocol struct {
	Name     string
	Metadata []byte
}

// cgTargetMetadata is ConsumerGroupTargetAssignmentMetadataValue (type
// 6). Kafka 4.1 has no assignment timestamp (a later tagged field).
type cgTargetMetadata struct {
	AssignmentEpoch int32
}

// cgTargetMember is ConsumerGroupTargetAssignmentMemberValue (type 7).
type cgTargetMember struct {
	TopicPartitions []topicPartitions
}

// cgCurrentAssignment is ConsumerGroupCurrentMemberAssignmentValue (type
// 8). State is one of the cgMember* states.
type cgCurrentAssignment struct {
	MemberEpoch, PreviousMemberEpoch                int32
	State                                           int8
	AssignedPartitions, PartitionsPendingRevocation []topicPartitions
}

// cgRegex is ConsumerGroupRegularExpressionValue (type 16): the topics a
// regular expression resolved to, the metadata version it was resolved
// at, and when. Kafka writes Topics sorted; so does the encoder.
type cgRegex struct {
	Topics      []string
	Version     int64
	TimestampMs int64
}

// consumerRecord is one decoded KIP-848 record; exactly one value pointer
// is set unless Tombstone.
type consumerRecord struct {
	Type      int16
	Group     string
	Member    string // member records (types 5, 7, 8)
	Regex     string // regex records (type 16)
	Tombstone bool

	Metadata          *cgMetadata
	PartitionMetadata *cgPartitionMetadata
	MemberMetadata    *cgMemberMetadata
	TargetMetadata    *cgTargetMetadata
	TargetMember      *cgTargetMember
	Current           *cgCurrentAssignment
	RegexValue        *cgRegex
}

// Encoders: nil value pointer -> tombstone (Value nil).

func cgMetadataRecord(group string, v *cgMetadata) log.KeyValue {
	kv := log.KeyValue{Key: cgKey(consumerGroupMetadataType, group)}
	if v != nil {
		w := cgValue()
		w.i32(v.Epoch)
		if v.MetadataHash != 0 {
			w.uvarint(1)
			w.uvarint(0)
			w.uvarint(8)
			w.i64(v.MetadataHash)
		} else {
			w.uvarint(0)
		}
		kv.Value = w.b
	}
	return kv
}

func cgMemberMetadataRecord(group, member string, v *cgMemberMetadata) log.KeyValue {
	kv := log.KeyValue{Key: cgKey(consumerGroupMemberMetadataType, group, member)}
	if v != nil {
		w := cgValue()
		w.nullableString(v.InstanceID)
		w.nullableString(v.RackID)
		w.compactString(v.ClientID)
		w.compactString(v.ClientHost)
		w.sortedStrings(v.SubscribedTopicNames)
		w.nullableString(v.SubscribedTopicRegex)
		w.i32(v.RebalanceTimeoutMs)
		w.nullableString(v.ServerAssignor)
		switch c := v.Classic; {
		case c == nil:
			w.uvarint(1) // one tagged field
			w.uvarint(0) // tag 0
			w.uvarint(1) // of one byte
			w.uvarint(0) // null
		case c.SessionTimeoutMs == 0 && len(c.SupportedProtocols) == 0:
			w.uvarint(0) // the default: left out
		default:
			var s cgWriter
			s.i32(c.SessionTimeoutMs)
			s.uvarint(uint32(len(c.SupportedProtocols) + 1))
			for _, p := range c.SupportedProtocols {
				s.compactString(p.Name)
				s.compactBytes(p.Metadata)
				s.uvarint(0)
			}
			s.uvarint(0)
			w.uvarint(1)
			w.uvarint(0)
			w.uvarint(uint32(len(s.b) + 1))
			w.uvarint(1) // present
			w.b = append(w.b, s.b...)
		}
		kv.Value = w.b
	}
	return kv
}

func cgTargetMetadataRecord(group string, v *cgTargetMetadata) log.KeyValue {
	kv := log.KeyValue{Key: cgKey(consumerGroupTargetMetadataType, group)}
	if v != nil {
		w := cgValue()
		w.i32(v.AssignmentEpoch)
		w.uvarint(0)
		kv.Value = w.b
	}
	return kv
}

func cgTargetMemberRecord(group, member string, v *cgTargetMember) log.KeyValue {
	kv := log.KeyValue{Key: cgKey(consumerGroupTargetMemberType, group, member)}
	if v != nil {
		w := cgValue()
		w.topicPartitions(v.TopicPartitions)
		w.uvarint(0)
		kv.Value = w.b
	}
	return kv
}

func cgCurrentAssignmentRecord(group, member string, v *cgCurrentAssignment) log.KeyValue {
	kv := log.KeyValue{Key: cgKey(consumerGroupCurrentAssignmentType, group, member)}
	if v != nil {
		w := cgValue()
		w.i32(v.MemberEpoch)
		w.i32(v.PreviousMemberEpoch)
		w.b = append(w.b, byte(v.State))
		w.topicPartitions(v.AssignedPartitions)
		w.topicPartitions(v.PartitionsPendingRevocation)
		w.uvarint(0)
		kv.Value = w.b
	}
	return kv
}

func cgRegexRecord(group, regex string, v *cgRegex) log.KeyValue {
	kv := log.KeyValue{Key: cgKey(consumerGroupRegexType, group, regex)}
	if v != nil {
		w := cgValue()
		w.sortedStrings(v.Topics)
		w.i64(v.Version)
		w.i64(v.TimestampMs)
		w.uvarint(0)
		kv.Value = w.b
	}
	return kv
}

// cgPartitionMetadataTombstone deletes a group's type 4 record, as Kafka
// 4.1 does once it keeps the group's metadata hash instead.
func cgPartitionMetadataTombstone(group string) log.KeyValue {
	return log.KeyValue{Key: cgKey(consumerGroupPartitionMetadataType, group)}
}

// cgWriter appends Kafka's primitive types.
type cgWriter struct{ b []byte }

func cgKey(typ int16, fields ...string) []byte {
	n := 2
	for _, f := range fields {
		n += 2 + len(f)
	}
	w := cgWriter{b: make([]byte, 0, n)}
	w.i16(typ)
	for _, f := range fields {
		w.i16(int16(len(f)))
		w.b = append(w.b, f...)
	}
	return w.b
}

func cgValue() *cgWriter {
	w := &cgWriter{b: make([]byte, 0, 64)}
	w.i16(cgValueVersion)
	return w
}

func (w *cgWriter) i16(v int16) { w.b = binary.BigEndian.AppendUint16(w.b, uint16(v)) }
func (w *cgWriter) i32(v int32) { w.b = binary.BigEndian.AppendUint32(w.b, uint32(v)) }
func (w *cgWriter) i64(v int64) { w.b = binary.BigEndian.AppendUint64(w.b, uint64(v)) }

func (w *cgWriter) uvarint(v uint32) { w.b = binary.AppendUvarint(w.b, uint64(v)) }

func (w *cgWriter) compactString(s string) {
	w.uvarint(uint32(len(s) + 1))
	w.b = append(w.b, s...)
}

func (w *cgWriter) nullableString(s *string) {
	if s == nil {
		w.uvarint(0)
		return
	}
	w.compactString(*s)
}

func (w *cgWriter) compactBytes(b []byte) {
	w.uvarint(uint32(len(b) + 1))
	w.b = append(w.b, b...)
}

// sortedStrings writes a compact array of strings in ascending order, as
// Kafka writes the sets it keeps as lists.
func (w *cgWriter) sortedStrings(ss []string) {
	if !slices.IsSorted(ss) {
		ss = slices.Sorted(slices.Values(ss))
	}
	w.uvarint(uint32(len(ss) + 1))
	for _, s := range ss {
		w.compactString(s)
	}
}

func (w *cgWriter) topicPartitions(tps []topicPartitions) {
	w.uvarint(uint32(len(tps) + 1))
	for _, tp := range tps {
		w.b = append(w.b, tp.TopicID[:]...)
		w.uvarint(uint32(len(tp.Partitions) + 1))
		for _, p := range tp.Partitions {
			w.i32(p)
		}
		w.uvarint(0)
	}
}

// decodeConsumerRecord decodes a record of one of the key types above; a
// nil value is a tombstone. It fails on any other key type, on a value
// version other than 0 (as Kafka does), on input that is truncated or has
// bytes left over, and on what Kafka's reader refuses (a null where none
// may be, a string longer than maxRecordString).
func decodeConsumerRecord(key, value []byte) (consumerRecord, error) {
	var rec consumerRecord
	k := cgReader{b: key}
	rec.Type = k.i16("record type")
	if k.err != nil {
		return consumerRecord{}, k.err
	}
	switch rec.Type {
	case consumerGroupMetadataType, consumerGroupPartitionMetadataType, consumerGroupTargetMetadataType:
		rec.Group = k.str("group id")
	case consumerGroupMemberMetadataType, consumerGroupTargetMemberType, consumerGroupCurrentAssignmentType:
		rec.Group = k.str("group id")
		rec.Member = k.str("member id")
	case consumerGroupRegexType:
		rec.Group = k.str("group id")
		rec.Regex = k.str("regular expression")
	default:
		return consumerRecord{}, fmt.Errorf("record type %d is not a consumer group record", rec.Type)
	}
	if err := k.end("key"); err != nil {
		return consumerRecord{}, fmt.Errorf("consumer group record type %d key: %w", rec.Type, err)
	}
	if value == nil {
		rec.Tombstone = true
		return rec, nil
	}
	v := cgReader{b: value}
	if version := v.i16("value version"); v.err == nil && version != cgValueVersion {
		return consumerRecord{}, fmt.Errorf("consumer group record type %d: unknown value version %d", rec.Type, version)
	}
	switch rec.Type {
	case consumerGroupMetadataType:
		rec.Metadata = v.metadata()
	case consumerGroupPartitionMetadataType:
		rec.PartitionMetadata = v.partitionMetadata()
	case consumerGroupMemberMetadataType:
		rec.MemberMetadata = v.memberMetadata()
	case consumerGroupTargetMetadataType:
		rec.TargetMetadata = &cgTargetMetadata{AssignmentEpoch: v.i32("assignment epoch")}
		v.tags(nil)
	case consumerGroupTargetMemberType:
		rec.TargetMember = &cgTargetMember{TopicPartitions: v.topicPartitions("topic partitions")}
		v.tags(nil)
	case consumerGroupCurrentAssignmentType:
		c := &cgCurrentAssignment{
			MemberEpoch:         v.i32("member epoch"),
			PreviousMemberEpoch: v.i32("previous member epoch"),
			State:               v.i8("state"),
		}
		c.AssignedPartitions = v.topicPartitions("assigned partitions")
		c.PartitionsPendingRevocation = v.topicPartitions("partitions pending revocation")
		v.tags(nil)
		rec.Current = c
	case consumerGroupRegexType:
		rec.RegexValue = &cgRegex{
			Topics:      v.strings("topics"),
			Version:     v.i64("version"),
			TimestampMs: v.i64("timestamp"),
		}
		v.tags(nil)
	}
	if err := v.end("value"); err != nil {
		return consumerRecord{}, fmt.Errorf("consumer group record type %d value: %w", rec.Type, err)
	}
	return rec, nil
}

// cgReader reads Kafka's primitive types; the first error sticks and
// every later read returns zero values.
type cgReader struct {
	b   []byte
	err error
}

func (r *cgReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf(format, args...)
	}
}

func (r *cgReader) end(what string) error {
	if r.err == nil && len(r.b) > 0 {
		r.fail("%d bytes after the %s", len(r.b), what)
	}
	return r.err
}

func (r *cgReader) take(n uint64, what string) []byte {
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.fail("%s: %d bytes, %d left", what, n, len(r.b))
		return nil
	}
	out := r.b[:n:n]
	r.b = r.b[n:]
	return out
}

func (r *cgReader) i8(what string) int8 {
	if b := r.take(1, what); b != nil {
		return int8(b[0])
	}
	return 0
}

func (r *cgReader) i16(what string) int16 {
	if b := r.take(2, what); b != nil {
		return int16(binary.BigEndian.Uint16(b))
	}
	return 0
}

func (r *cgReader) i32(what string) int32 {
	if b := r.take(4, what); b != nil {
		return int32(binary.BigEndian.Uint32(b))
	}
	return 0
}

func (r *cgReader) i64(what string) int64 {
	if b := r.take(8, what); b != nil {
		return int64(binary.BigEndian.Uint64(b))
	}
	return 0
}

// uvarint reads an unsigned varint of at most 5 bytes and 32 bits, as
// Kafka's readUnsignedVarint (which drops the bits past 32 where this
// fails).
func (r *cgReader) uvarint(what string) uint32 {
	if r.err != nil {
		return 0
	}
	var v uint32
	for i := 0; ; i++ {
		if i >= len(r.b) {
			r.fail("%s: truncated varint", what)
			return 0
		}
		c := r.b[i]
		if i == 4 && c > 0x0f {
			r.fail("%s: varint too long", what)
			return 0
		}
		v |= uint32(c&0x7f) << (7 * i)
		if c < 0x80 {
			r.b = r.b[i+1:]
			return v
		}
	}
}

// length reads a compact length (the length plus one) that may not be
// null.
func (r *cgReader) length(what string) uint64 {
	n := r.uvarint(what)
	if r.err == nil && n == 0 {
		r.fail("%s: null", what)
	}
	if n == 0 {
		return 0
	}
	return uint64(n) - 1
}

// count reads a compact array's length; every element takes at least
// one byte, so one that cannot fit fails before anything is allocated.
func (r *cgReader) count(what string) int {
	n := r.length(what)
	if r.err == nil && n > uint64(len(r.b)) {
		r.fail("%s: %d elements, %d bytes left", what, n, len(r.b))
	}
	if r.err != nil {
		return 0
	}
	return int(n)
}

func (r *cgReader) checkString(n uint64, what string) {
	if r.err == nil && n > maxRecordString {
		r.fail("%s: string of %d bytes", what, n)
	}
}

// str reads a non-flexible string (int16 length), not null.
func (r *cgReader) str(what string) string {
	n := r.i16(what)
	if r.err == nil && n < 0 {
		r.fail("%s: null", what)
	}
	if r.err != nil {
		return ""
	}
	return string(r.take(uint64(n), what))
}

func (r *cgReader) compactString(what string) string {
	n := r.length(what)
	r.checkString(n, what)
	return string(r.take(n, what))
}

func (r *cgReader) nullableString(what string) *string {
	n := r.uvarint(what)
	if n == 0 || r.err != nil {
		return nil
	}
	r.checkString(uint64(n)-1, what)
	s := string(r.take(uint64(n)-1, what))
	if r.err != nil {
		return nil
	}
	return &s
}

func (r *cgReader) compactBytes(what string) []byte {
	n := r.length(what)
	b := r.take(n, what)
	if len(b) == 0 {
		return nil
	}
	return slices.Clone(b)
}

func (r *cgReader) strings(what string) []string {
	n := r.count(what)
	if n == 0 {
		return nil
	}
	out := make([]string, 0, n)
	for range n {
		out = append(out, r.compactString(what))
	}
	if r.err != nil {
		return nil
	}
	return out
}

func (r *cgReader) uuid(what string) (id [16]byte) {
	copy(id[:], r.take(16, what))
	return id
}

func (r *cgReader) topicPartitions(what string) []topicPartitions {
	n := r.count(what)
	if n == 0 {
		return nil
	}
	out := make([]topicPartitions, 0, n)
	for range n {
		tp := topicPartitions{TopicID: r.uuid(what)}
		if np := r.count(what); np > 0 {
			tp.Partitions = make([]int32, 0, np)
			for range np {
				tp.Partitions = append(tp.Partitions, r.i32(what))
			}
		}
		r.tags(nil)
		if r.err != nil {
			return nil
		}
		out = append(out, tp)
	}
	return out
}

// tags reads a tagged fields section, handing each field's bytes to
// known, which reads the fields it knows and says so; the others (fields
// of later versions of Kafka) are skipped, as Kafka skips them. known
// must read a field it knows whole.
func (r *cgReader) tags(known func(tag uint32, f *cgReader) bool) {
	n := r.uvarint("tagged fields")
	for range n {
		if r.err != nil {
			return
		}
		tag := r.uvarint("tag")
		size := r.uvarint("tagged field size")
		data := r.take(uint64(size), "tagged field")
		if r.err != nil {
			return
		}
		if known == nil {
			continue
		}
		f := cgReader{b: data}
		if known(tag, &f) {
			if err := f.end(fmt.Sprintf("tagged field %d", tag)); err != nil {
				r.fail("%w", err)
			}
		}
	}
}

func (r *cgReader) metadata() *cgMetadata {
	m := &cgMetadata{Epoch: r.i32("epoch")}
	r.tags(func(tag uint32, f *cgReader) bool {
		if tag != 0 {
			return false
		}
		m.MetadataHash = f.i64("metadata hash")
		return true
	})
	return m
}

func (r *cgReader) partitionMetadata() *cgPartitionMetadata {
	m := &cgPartitionMetadata{}
	n := r.count("topics")
	for range n {
		t := cgTopicMetadata{
			TopicID:       r.uuid("topic id"),
			TopicName:     r.compactString("topic name"),
			NumPartitions: r.i32("partitions"),
		}
		np := r.count("partition metadata")
		for range np {
			pr := cgPartitionRacks{Partition: r.i32("partition"), Racks: r.strings("racks")}
			r.tags(nil)
			if r.err != nil {
				return m
			}
			t.PartitionMetadata = append(t.PartitionMetadata, pr)
		}
		r.tags(nil)
		if r.err != nil {
			return m
		}
		m.Topics = append(m.Topics, t)
	}
	r.tags(nil)
	return m
}

func (r *cgReader) memberMetadata() *cgMemberMetadata {
	m := &cgMemberMetadata{
		InstanceID:           r.nullableString("instance id"),
		RackID:               r.nullableString("rack id"),
		ClientID:             r.compactString("client id"),
		ClientHost:           r.compactString("client host"),
		SubscribedTopicNames: r.strings("subscribed topic names"),
		SubscribedTopicRegex: r.nullableString("subscribed topic regex"),
		RebalanceTimeoutMs:   r.i32("rebalance timeout"),
		ServerAssignor:       r.nullableString("server assignor"),
		// The field's default (see cgMemberMetadata.Classic).
		Classic: &cgClassicMemberMetadata{},
	}
	r.tags(func(tag uint32, f *cgReader) bool {
		if tag != 0 {
			return false
		}
		// Kafka takes a presence marker that is not positive as null.
		if present := f.uvarint("classic member metadata"); f.err != nil || int32(present) <= 0 {
			m.Classic = nil
			return true
		}
		c := &cgClassicMemberMetadata{SessionTimeoutMs: f.i32("session timeout")}
		n := f.count("supported protocols")
		for range n {
			p := cgClassicProtocol{Name: f.compactString("protocol name"), Metadata: f.compactBytes("protocol metadata")}
			f.tags(nil)
			if f.err != nil {
				break
			}
			c.SupportedProtocols = append(c.SupportedProtocols, p)
		}
		f.tags(nil)
		m.Classic = c
		return true
	})
	return m
}
