'use strict'

// kafkajs compatibility check for weir, run by
// integration/kafkajs_compat_test.go as `node compat.js <host:port>`.
// It asserts as it goes and exits non-zero on the first failure (or when
// the overall time bound runs out); on success its last line is
// "kafkajs compat: all N checks passed".
//
// kafkajs speaks only non-flexible versions: Metadata <= 6, Produce <= 7,
// Fetch <= 11, ListOffsets <= 3, CreateTopics <= 3, DeleteTopics <= 1,
// DescribeConfigs <= 2, CreatePartitions <= 1, DeleteRecords 0,
// InitProducerId <= 1; for groups FindCoordinator <= 2, JoinGroup <= 5,
// SyncGroup <= 3, Heartbeat <= 3, LeaveGroup <= 3, OffsetCommit <= 5,
// OffsetFetch <= 4, ListGroups <= 2, DescribeGroups <= 2, DeleteGroups <= 1.
//
// Consumption, twice:
//   - record by record, every record of three topics: kafkajs has no
//     group-less consumer, so these are read through its consumer fetch
//     path below the group layer: the Cluster the Kafka object builds for a
//     consumer (isolation level READ_COMMITTED, the consumer default),
//     Broker.fetch (Fetch v11) and the consumer's Batch class, exactly as
//     ConsumerGroup.fetch uses them (kafkajs internals, not public API);
//   - with the public group consumer (kafka.consumer({ groupId }),
//     subscribe, run with eachMessage) and the admin's group calls, on a
//     4-partition topic: see groupChecks.

const assert = require('node:assert/strict')
const { Kafka, logLevel, CompressionTypes, Partitioners, AssignerProtocol } = require('kafkajs')
const Batch = require('kafkajs/src/consumer/batch')
const ISOLATION_LEVEL = require('kafkajs/src/protocol/isolationLevel')

const bootstrap = process.argv[2]
if (!bootstrap) {
  console.error('usage: node compat.js <host:port>')
  process.exit(2)
}

const TOTAL_MS = Number(process.env.KAFKAJS_COMPAT_TIMEOUT_MS || 150000)
const STEP_MS = 30000 // bound on any one awaited step
const RECORDS = 5000
const PARTITIONS = 3
const CHUNK = 500 // records per producer.send, so several batches per partition

const watchdog = setTimeout(() => {
  console.error(`FAIL: kafkajs compat did not finish within ${TOTAL_MS} ms`)
  process.exit(3)
}, TOTAL_MS)
watchdog.unref()

let passed = 0
const ok = what => {
  passed++
  console.log(`ok ${passed} - ${what}`)
}

const withTimeout = (promise, what, ms = STEP_MS) => {
  let timer
  return Promise.race([
    promise,
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms)
    }),
  ]).finally(() => clearTimeout(timer))
}

// kafkajs logs (WARN and above) go to stderr, prefixed.
const logCreator = () => ({ namespace, level, label, log }) => {
  const { message, ...extra } = log
  console.error(`[kafkajs ${label}] ${namespace}: ${message} ${JSON.stringify(extra)}`)
}

const kafka = new Kafka({
  clientId: 'weir-kafkajs-compat',
  brokers: [bootstrap],
  connectionTimeout: 5000,
  requestTimeout: 15000,
  retry: { retries: 3, initialRetryTime: 100, maxRetryTime: 2000 },
  logLevel: logLevel.WARN,
  logCreator,
})

const suffix = `${process.pid}-${Date.now()}`
const topics = {
  none: `kafkajs-none-${suffix}`,
  gzip: `kafkajs-gzip-${suffix}`,
  idem: `kafkajs-idem-${suffix}`,
  admin: `kafkajs-admin-${suffix}`,
}
const RETENTION = '3600000'
const base = Date.now() - 3600 * 1000 // record timestamps: base + per-partition index

const valueOf = (topic, p, i) =>
  `${topic}|p${p}|${String(i).padStart(8, '0')}|` + 'kafkajs-on-weir-'.repeat(8)

async function adminChecks(admin) {
  const created = await withTimeout(
    admin.createTopics({
      waitForLeaders: true,
      timeout: 10000,
      topics: [
        {
          topic: topics.none,
          numPartitions: PARTITIONS,
          replicationFactor: 1,
          configEntries: [{ name: 'retention.ms', value: RETENTION }],
        },
        { topic: topics.gzip, numPartitions: PARTITIONS, replicationFactor: 1 },
        { topic: topics.idem, numPartitions: PARTITIONS, replicationFactor: 1 },
        { topic: topics.admin, numPartitions: PARTITIONS, replicationFactor: 1 },
      ],
    }),
    'admin.createTopics'
  )
  assert.equal(created, true, 'createTopics should report the topics as created')
  ok('admin.createTopics: 4 topics with 3 partitions each (one with retention.ms)')

  const again = await withTimeout(
    admin.createTopics({ topics: [{ topic: topics.none, numPartitions: PARTITIONS }] }),
    'admin.createTopics (again)'
  )
  assert.equal(again, false, 'creating an existing topic should answer TOPIC_ALREADY_EXISTS (false)')
  ok('admin.createTopics of an existing topic: TOPIC_ALREADY_EXISTS')

  const listed = await withTimeout(admin.listTopics(), 'admin.listTopics')
  for (const t of Object.values(topics)) assert.ok(listed.includes(t), `listTopics lacks ${t}: ${listed}`)
  ok('admin.listTopics lists the new topics')

  const cluster = await withTimeout(admin.describeCluster(), 'admin.describeCluster')
  assert.equal(cluster.brokers.length, 1, `describeCluster brokers: ${JSON.stringify(cluster)}`)
  const nodeId = cluster.brokers[0].nodeId
  assert.equal(`${cluster.brokers[0].host}:${cluster.brokers[0].port}`, bootstrap)
  assert.equal(cluster.controller, nodeId, `controller ${cluster.controller}, want ${nodeId}`)
  assert.ok(cluster.clusterId, 'describeCluster: empty cluster id')
  ok(`admin.describeCluster: one broker (node ${nodeId}) at ${bootstrap}, the controller`)

  const md = await withTimeout(
    admin.fetchTopicMetadata({ topics: [topics.none, topics.gzip] }),
    'admin.fetchTopicMetadata'
  )
  assert.equal(md.topics.length, 2)
  for (const t of md.topics) {
    const parts = [...t.partitions].sort((a, b) => a.partitionId - b.partitionId)
    assert.deepEqual(
      parts.map(p => p.partitionId),
      [0, 1, 2],
      `${t.name}: partitions ${JSON.stringify(parts)}`
    )
    for (const p of parts) {
      assert.equal(p.partitionErrorCode, 0, `${t.name}/${p.partitionId}: error ${p.partitionErrorCode}`)
      assert.equal(p.leader, nodeId, `${t.name}/${p.partitionId}: leader ${p.leader}`)
      assert.deepEqual(p.replicas, [nodeId])
      assert.deepEqual(p.isr, [nodeId])
    }
  }
  ok('admin.fetchTopicMetadata: 3 partitions each, led by the node, replicas = isr = [node]')

  const cfg = await withTimeout(
    admin.describeConfigs({ resources: [{ type: 2 /* TOPIC */, name: topics.none }], includeSynonyms: false }),
    'admin.describeConfigs'
  )
  assert.equal(cfg.resources.length, 1)
  assert.equal(cfg.resources[0].errorCode, 0, `describeConfigs error ${cfg.resources[0].errorCode}`)
  const entries = Object.fromEntries(cfg.resources[0].configEntries.map(e => [e.configName, e]))
  assert.equal(entries['retention.ms']?.configValue, RETENTION, `retention.ms: ${JSON.stringify(entries['retention.ms'])}`)
  assert.equal(entries['retention.ms'].isDefault, false)
  assert.equal(entries['cleanup.policy']?.configValue, 'delete')
  ok('admin.describeConfigs: retention.ms as set (not default), cleanup.policy=delete')

  await withTimeout(
    admin.createPartitions({ topicPartitions: [{ topic: topics.admin, count: 4 }] }),
    'admin.createPartitions'
  )
  const md4 = await withTimeout(admin.fetchTopicMetadata({ topics: [topics.admin] }), 'admin.fetchTopicMetadata')
  assert.equal(md4.topics[0].partitions.length, 4)
  ok('admin.createPartitions 3 -> 4')
  return nodeId
}

// produce sends RECORDS records in CHUNK-sized sends, round-robin over the
// partitions, and checks every reported base offset.
async function produce(producer, topic, compression) {
  const next = new Array(PARTITIONS).fill(0)
  for (let sent = 0; sent < RECORDS; sent += CHUNK) {
    const messages = []
    const first = [...next]
    for (let n = sent; n < Math.min(sent + CHUNK, RECORDS); n++) {
      const p = n % PARTITIONS
      const i = next[p]++
      messages.push({
        partition: p,
        key: `p${p}`,
        value: valueOf(topic, p, i),
        headers: { seq: String(i) },
        timestamp: String(base + i),
      })
    }
    const res = await withTimeout(
      producer.send({ topic, acks: -1, compression, messages }),
      `producer.send ${topic} records ${sent}..`
    )
    assert.equal(res.length, PARTITIONS, `send result: ${JSON.stringify(res)}`)
    for (const r of res) {
      assert.equal(r.topicName, topic)
      assert.equal(r.errorCode, 0, `${topic}/${r.partition}: error ${r.errorCode}`)
      assert.equal(r.baseOffset, String(first[r.partition]), `${topic}/${r.partition}: base offset ${r.baseOffset}, want ${first[r.partition]}`)
    }
  }
  return next
}

async function offsetChecks(admin, topic, counts) {
  const offs = await withTimeout(admin.fetchTopicOffsets(topic), 'admin.fetchTopicOffsets')
  assert.equal(offs.length, PARTITIONS)
  for (const o of offs) {
    assert.equal(o.low, '0', `${topic}/${o.partition}: low ${o.low}`)
    assert.equal(o.high, String(counts[o.partition]), `${topic}/${o.partition}: high ${o.high}`)
  }
  const byTs = await withTimeout(
    admin.fetchTopicOffsetsByTimestamp(topic, base + 1000),
    'admin.fetchTopicOffsetsByTimestamp'
  )
  for (const o of byTs) {
    assert.equal(o.offset, '1000', `${topic}/${o.partition}: offset for timestamp base+1000 is ${o.offset}`)
  }
  ok(`${topic}: fetchTopicOffsets low 0 / high ${counts.join(',')}; by timestamp finds offset 1000`)
}

// consume reads every partition from offset 0 through kafkajs's consumer
// fetch path (see the top of the file) and verifies each record.
async function consume(cluster, topic, counts, nodeId, idempotent) {
  await withTimeout(cluster.addTargetTopic(topic), 'cluster.addTargetTopic')
  const leaders = cluster.findLeaderForPartitions(topic, [0, 1, 2])
  assert.deepEqual(Object.keys(leaders), [String(nodeId)], `leaders ${JSON.stringify(leaders)}`)
  const broker = await withTimeout(cluster.findBroker({ nodeId }), 'cluster.findBroker')

  const next = new Array(PARTITIONS).fill(0)
  const deadline = Date.now() + 60000
  let fetches = 0
  while (next.some((n, p) => n < counts[p])) {
    assert.ok(Date.now() < deadline, `${topic}: consumed ${next} of ${counts} within 60 s`)
    const req = [0, 1, 2]
      .filter(p => next[p] < counts[p])
      .map(p => ({ partition: p, fetchOffset: String(next[p]), maxBytes: 64 * 1024 }))
    const { responses } = await withTimeout(
      broker.fetch({
        maxWaitTime: 500,
        minBytes: 1,
        maxBytes: 256 * 1024,
        isolationLevel: ISOLATION_LEVEL.READ_COMMITTED,
        topics: [{ topic, partitions: req }],
      }),
      `fetch ${topic}`
    )
    fetches++
    for (const { topicName, partitions } of responses) {
      assert.equal(topicName, topic)
      for (const pd of partitions) {
        const p = pd.partition
        assert.equal(pd.errorCode, 0, `${topic}/${p}: fetch error ${pd.errorCode}`)
        assert.equal(pd.highWatermark, String(counts[p]), `${topic}/${p}: high watermark ${pd.highWatermark}`)
        assert.equal(pd.lastStableOffset, String(counts[p]), `${topic}/${p}: last stable offset ${pd.lastStableOffset}`)
        const fetched = req.find(r => r.partition === p).fetchOffset
        const batch = new Batch(topic, fetched, pd)
        for (const m of batch.messages) {
          const i = next[p]
          const where = `${topic}/${p} record ${i}`
          assert.equal(m.offset, String(i), `${where}: offset ${m.offset}`)
          assert.equal(m.key.toString(), `p${p}`, `${where}: key`)
          assert.equal(m.value.toString(), valueOf(topic, p, i), `${where}: value`)
          assert.equal(m.headers.seq?.toString(), String(i), `${where}: headers ${JSON.stringify(m.headers)}`)
          assert.equal(m.timestamp, String(base + i), `${where}: timestamp ${m.timestamp}`)
          assert.equal(m.magicByte, 2, `${where}: magic ${m.magicByte}`)
          const pid = m.batchContext.producerId
          if (idempotent) assert.notEqual(pid, '-1', `${where}: no producer ID in an idempotent batch`)
          else assert.equal(pid, '-1', `${where}: producer ID ${pid}, want -1`)
          next[p]++
        }
      }
    }
  }
  // Nothing beyond: a fetch at the end waits and returns no records.
  const { responses } = await withTimeout(
    broker.fetch({
      maxWaitTime: 300,
      minBytes: 1,
      maxBytes: 256 * 1024,
      isolationLevel: ISOLATION_LEVEL.READ_COMMITTED,
      topics: [{ topic, partitions: [0, 1, 2].map(p => ({ partition: p, fetchOffset: String(counts[p]), maxBytes: 64 * 1024 })) }],
    }),
    `fetch ${topic} at the end`
  )
  for (const { partitions } of responses) {
    for (const pd of partitions) {
      assert.equal(pd.errorCode, 0)
      assert.equal(pd.messages.length, 0, `${topic}/${pd.partition}: ${pd.messages.length} records past the end`)
    }
  }
  ok(`${topic}: read back ${counts.reduce((a, b) => a + b)} records in order with Fetch v11 (read_committed) in ${fetches} fetches${idempotent ? ', producer IDs set' : ''}, nothing extra`)
}

async function deleteChecks(admin, producer) {
  const msgs = Array.from({ length: 10 }, (_, i) => ({ partition: 0, value: `r${i}` }))
  const res = await withTimeout(producer.send({ topic: topics.admin, acks: -1, messages: msgs }), 'send to the admin topic')
  assert.equal(res[0].baseOffset, '0')
  // deleteTopicRecords looks the leader up in the admin's cached metadata
  // before loading it (a kafkajs quirk, the same against Kafka): make the
  // topic one of the admin's target topics first.
  await withTimeout(admin.fetchTopicOffsets(topics.admin), 'admin.fetchTopicOffsets')
  await withTimeout(
    admin.deleteTopicRecords({ topic: topics.admin, partitions: [{ partition: 0, offset: '4' }] }),
    'admin.deleteTopicRecords'
  )
  const offs = await withTimeout(admin.fetchTopicOffsets(topics.admin), 'admin.fetchTopicOffsets')
  const p0 = offs.find(o => o.partition === 0)
  assert.equal(p0.low, '4', `after deleteTopicRecords: low ${p0.low}`)
  assert.equal(p0.high, '10', `after deleteTopicRecords: high ${p0.high}`)
  ok('admin.deleteTopicRecords: log start 4, high watermark 10')

  await withTimeout(admin.deleteTopics({ topics: [topics.admin], timeout: 10000 }), 'admin.deleteTopics')
  const deadline = Date.now() + 10000
  for (;;) {
    const listed = await withTimeout(admin.listTopics(), 'admin.listTopics')
    if (!listed.includes(topics.admin)) break
    assert.ok(Date.now() < deadline, `${topics.admin} still listed 10 s after deleteTopics`)
    await new Promise(r => setTimeout(r, 100))
  }
  ok('admin.deleteTopics: the topic is gone')
}

// ---------------------------------------------------------------------------
// Consumer groups through kafkajs's public consumer and admin.

const GROUP_PARTITIONS = 4
const groupValue = (p, off) => `kafkajs-group-p${p}-o${off}`

// produceGroupBatch appends perPartition records to every partition of the
// group topic (value groupValue(p, offset)) and advances ends.
async function produceGroupBatch(producer, topic, ends, perPartition) {
  const messages = []
  for (let p = 0; p < GROUP_PARTITIONS; p++) {
    for (let i = 0; i < perPartition; i++) messages.push({ partition: p, value: groupValue(p, ends[p] + i) })
  }
  const res = await withTimeout(producer.send({ topic, acks: -1, messages }), `send to ${topic}`)
  for (const r of res) {
    assert.equal(r.errorCode, 0)
    assert.equal(r.baseOffset, String(ends[r.partition]), `${topic}/${r.partition}: base offset ${r.baseOffset}, want ${ends[r.partition]}`)
  }
  for (let p = 0; p < GROUP_PARTITIONS; p++) ends[p] += perPartition
}

// GroupRun is what the members of one group consumed: partition:offset ->
// member, plus every problem seen (duplicates, strays, crashes).
class GroupRun {
  constructor(topic) {
    this.topic = topic
    this.seen = new Map()
    this.problems = []
    this.apis = new Set() // "apiName vN" of the group consumers' requests
  }

  get count() {
    return this.seen.size
  }
}

// startMember connects a group consumer, subscribes it to the topic from
// the beginning and runs it, recording into run. The member's latest
// assignment (from its GROUP_JOIN events) is member.assignment.
async function startMember(run, groupId, name) {
  const consumer = kafka.consumer({
    groupId,
    sessionTimeout: 10000,
    rebalanceTimeout: 20000,
    heartbeatInterval: 500,
    maxWaitTimeInMs: 200,
    allowAutoTopicCreation: false,
    retry: { retries: 5, initialRetryTime: 100, maxRetryTime: 2000 },
  })
  const member = { name, consumer, assignment: null, joins: 0, memberId: null, isLeader: false }
  consumer.on(consumer.events.GROUP_JOIN, e => {
    member.joins++
    member.memberId = e.payload.memberId
    member.isLeader = e.payload.isLeader
    member.assignment = (e.payload.memberAssignment[run.topic] || []).slice().sort((a, b) => a - b)
  })
  consumer.on(consumer.events.CRASH, e => {
    run.problems.push(`${name} crashed: ${e.payload.error && e.payload.error.stack}`)
  })
  consumer.on(consumer.events.REQUEST, e => run.apis.add(`${e.payload.apiName} v${e.payload.apiVersion}`))
  await withTimeout(consumer.connect(), `${name}: consumer.connect`)
  await withTimeout(consumer.subscribe({ topics: [run.topic], fromBeginning: true }), `${name}: consumer.subscribe`)
  await withTimeout(
    consumer.run({
      eachMessage: async ({ topic, partition, message }) => {
        const key = `${partition}:${message.offset}`
        if (topic !== run.topic) run.problems.push(`${name} got a record of ${topic}`)
        else if (run.seen.has(key)) run.problems.push(`${topic}/${key} consumed twice: by ${run.seen.get(key)}, then by ${name}`)
        else if (message.value.toString() !== groupValue(partition, message.offset))
          run.problems.push(`${topic}/${key}: value ${message.value}, want ${groupValue(partition, message.offset)}`)
        else if (!member.assignment || !member.assignment.includes(partition))
          run.problems.push(`${name} consumed ${topic}/${key} but is assigned ${JSON.stringify(member.assignment)}`)
        run.seen.set(key, name)
      },
    }),
    `${name}: consumer.run`
  )
  return member
}

async function stopMember(member) {
  await withTimeout(member.consumer.disconnect(), `${member.name}: consumer.disconnect`)
}

const sleep = ms => new Promise(r => setTimeout(r, ms))

// eventually polls cond (async) every 100 ms until it returns true, for at
// most ms; describe() explains the last state on failure.
async function eventually(what, ms, cond, describe) {
  const deadline = Date.now() + ms
  for (;;) {
    if (await cond()) return
    if (Date.now() > deadline) throw new Error(`${what}: not true within ${ms} ms; ${await describe()}`)
    await sleep(100)
  }
}

// awaitAssignment waits until every member's latest assignment has the
// wanted size and together they hold every partition once.
async function awaitAssignment(run, what, members, sizes) {
  const state = () => members.map(m => `${m.name}=${JSON.stringify(m.assignment)}`).join(' ')
  const t0 = Date.now()
  await eventually(what, 45000, () => {
    const all = members.flatMap(m => m.assignment || [])
    return (
      members.every((m, i) => m.assignment && m.assignment.length === sizes[i]) &&
      all.length === GROUP_PARTITIONS &&
      new Set(all).size === GROUP_PARTITIONS
    )
  }, state)
  assert.deepEqual(run.problems, [], `${what}: ${run.problems.slice(0, 5).join('; ')}`)
  ok(`${what}: assignment settled in ${Date.now() - t0} ms: ${state()}`)
}

// awaitConsumed waits until every offset below ends was consumed exactly
// once (and a second more, for duplicates).
async function awaitConsumed(run, what, ends, members) {
  const want = ends.reduce((a, b) => a + b)
  const t0 = Date.now()
  await eventually(what, 45000, () => run.count >= want || run.problems.length > 0,
    () => `consumed ${run.count} of ${want}; assignment ${members.map(m => `${m.name}=${JSON.stringify(m.assignment)}`).join(' ')}`)
  await sleep(1000)
  assert.deepEqual(run.problems, [], `${what}: ${run.problems.slice(0, 5).join('; ')}`)
  assert.equal(run.count, want, `${what}: consumed ${run.count} records, want ${want}`)
  for (let p = 0; p < GROUP_PARTITIONS; p++) {
    for (let o = 0; o < ends[p]; o++) assert.ok(run.seen.has(`${p}:${o}`), `${what}: ${run.topic}/${p}@${o} never consumed`)
  }
  const per = {}
  for (const m of run.seen.values()) per[m] = (per[m] || 0) + 1
  ok(`${what}: all ${want} records consumed exactly once in ${Date.now() - t0} ms (per member, in total: ${JSON.stringify(per)})`)
}

async function committed(admin, groupId, topic) {
  const res = await withTimeout(admin.fetchOffsets({ groupId, topics: [topic] }), 'admin.fetchOffsets')
  assert.equal(res.length, 1, `fetchOffsets: ${JSON.stringify(res)}`)
  assert.equal(res[0].topic, topic)
  const out = new Array(GROUP_PARTITIONS).fill(null)
  for (const p of res[0].partitions) out[p.partition] = p.offset
  return out
}

// awaitCommitted waits until the group's committed offsets are ends
// (kafkajs auto-commits after each batch).
async function awaitCommitted(admin, what, groupId, topic, ends) {
  const want = ends.map(String)
  let got
  await eventually(`${what}: committed offsets`, 15000, async () => {
    got = await committed(admin, groupId, topic)
    return JSON.stringify(got) === JSON.stringify(want)
  }, () => `admin.fetchOffsets: ${JSON.stringify(got)}, want ${JSON.stringify(want)}`)
  ok(`${what}: admin.fetchOffsets shows ${JSON.stringify(want)} committed`)
}

async function describeGroup(admin, groupId) {
  const { groups } = await withTimeout(admin.describeGroups([groupId]), 'admin.describeGroups')
  assert.equal(groups.length, 1, `describeGroups: ${JSON.stringify(groups)}`)
  const g = groups[0]
  assert.equal(g.groupId, groupId)
  assert.equal(g.errorCode, 0, `describeGroups ${groupId}: error ${g.errorCode}`)
  return g
}

async function checkDescription(admin, what, groupId, topic, members) {
  const g = await describeGroup(admin, groupId)
  assert.equal(g.state, 'Stable', `${what}: describeGroups state ${g.state}`)
  assert.equal(g.protocolType, 'consumer', `${what}: describeGroups protocol type ${g.protocolType}`)
  assert.equal(g.protocol, 'RoundRobinAssigner', `${what}: describeGroups protocol ${g.protocol}`)
  assert.equal(g.members.length, members.length, `${what}: describeGroups members ${JSON.stringify(g.members.map(m => m.memberId))}`)
  for (const m of members) {
    const d = g.members.find(x => x.memberId === m.memberId)
    assert.ok(d, `${what}: describeGroups has no member ${m.memberId} (${m.name})`)
    assert.equal(d.clientId, 'weir-kafkajs-compat')
    assert.ok(d.clientHost, `${what}: member ${m.name} has no client host`)
    const meta = AssignerProtocol.MemberMetadata.decode(d.memberMetadata)
    assert.deepEqual(meta.topics, [topic], `${what}: member ${m.name} metadata ${JSON.stringify(meta)}`)
    const asg = AssignerProtocol.MemberAssignment.decode(d.memberAssignment)
    const parts = ((asg && asg.assignment[topic]) || []).slice().sort((a, b) => a - b)
    assert.deepEqual(parts, m.assignment, `${what}: member ${m.name} assignment ${JSON.stringify(asg)}, the consumer has ${JSON.stringify(m.assignment)}`)
  }
  ok(`${what}: describeGroups: Stable, consumer/RoundRobinAssigner, ${members.length} member(s) with their metadata and assignments`)
}

async function listed(admin, groupId) {
  const { groups } = await withTimeout(admin.listGroups(), 'admin.listGroups')
  return groups.find(g => g.groupId === groupId)
}

// groupChecks: one consumer reads everything and commits; a second joins
// and they split the 4 partitions 2/2 and read a new batch exactly once;
// the admin lists and describes the group and may neither set offsets nor
// delete the group while it has members; one leaves and the other takes
// everything; once empty, setOffsets rewinds partition 0 (a new member
// starts there), resetOffsets goes back to the earliest offsets,
// deleteGroups deletes the group.
async function groupChecks(admin) {
  const topic = `kafkajs-group-${suffix}`
  const groupId = `kafkajs-group-${suffix}`
  // A producer of its own: the other one still has the topic deleteChecks
  // deleted among its metadata targets, and kafkajs fails a send when a
  // target topic is unknown (as it does against Kafka).
  const producer = kafka.producer({ allowAutoTopicCreation: false, createPartitioner: Partitioners.DefaultPartitioner })
  await withTimeout(producer.connect(), 'group producer.connect')
  await withTimeout(
    admin.createTopics({ waitForLeaders: true, timeout: 10000, topics: [{ topic, numPartitions: GROUP_PARTITIONS, replicationFactor: 1 }] }),
    'admin.createTopics (group topic)'
  )
  const ends = new Array(GROUP_PARTITIONS).fill(0)
  await produceGroupBatch(producer, topic, ends, 100)
  const run = new GroupRun(topic)
  const members = []
  try {
    const c1 = await startMember(run, groupId, 'member-1')
    members.push(c1)
    await awaitConsumed(run, 'group: one member', ends, [c1])
    await awaitAssignment(run, 'group: one member', [c1], [4])
    assert.ok(c1.isLeader, 'the only member is the leader')
    await awaitCommitted(admin, 'group: one member', groupId, topic, ends)

    const l = await listed(admin, groupId)
    assert.ok(l, `admin.listGroups does not list ${groupId}`)
    assert.equal(l.protocolType, 'consumer')
    ok('admin.listGroups lists the group with protocol type consumer')
    await checkDescription(admin, 'group: one member', groupId, topic, [c1])

    // Refused while the group has a member.
    await assert.rejects(
      withTimeout(admin.setOffsets({ groupId, topic, partitions: [{ partition: 0, offset: '1' }] }), 'admin.setOffsets'),
      e => /no running instances, current state: Stable/.test(e.message),
      'admin.setOffsets on a group with a member'
    )
    ok('admin.setOffsets refused while the group is Stable with a member')
    await assert.rejects(
      withTimeout(admin.deleteGroups([groupId]), 'admin.deleteGroups'),
      e => e.name === 'KafkaJSDeleteGroupsError' && e.groups.length === 1 && e.groups[0].error.type === 'NON_EMPTY_GROUP',
      'admin.deleteGroups on a group with a member'
    )
    ok('admin.deleteGroups of a group with a member: NON_EMPTY_GROUP')

    // A second member joins: 2 partitions each.
    const joins1 = c1.joins
    const c2 = await startMember(run, groupId, 'member-2')
    members.push(c2)
    await awaitAssignment(run, 'group: second member joined', [c1, c2], [2, 2])
    assert.ok(c1.joins > joins1, 'the first member rejoined')
    await produceGroupBatch(producer, topic, ends, 50)
    await awaitConsumed(run, 'group: two members', ends, [c1, c2])
    await awaitCommitted(admin, 'group: two members', groupId, topic, ends)
    await checkDescription(admin, 'group: two members', groupId, topic, [c1, c2])

    // The second member leaves (LeaveGroup): the first takes everything.
    await stopMember(c2)
    members.pop()
    await awaitAssignment(run, 'group: second member left', [c1], [4])
    await produceGroupBatch(producer, topic, ends, 10)
    await awaitConsumed(run, 'group: one member again', ends, [c1])
    await awaitCommitted(admin, 'group: one member again', groupId, topic, ends)
    await stopMember(c1)
    members.pop()

    const g = await describeGroup(admin, groupId)
    assert.equal(g.state, 'Empty', `describeGroups of the group without members: state ${g.state}`)
    assert.equal(g.members.length, 0)
    assert.ok(await listed(admin, groupId), `admin.listGroups does not list the empty ${groupId}`)
    ok('group without members: describeGroups Empty, still listed, offsets kept')
    assert.deepEqual(await committed(admin, groupId, topic), ends.map(String))

    // setOffsets (kafkajs joins the group with a consumer of its own and
    // commits with its generation) rewinds partition 0; a new member
    // starts there and finds nothing new elsewhere.
    await withTimeout(admin.setOffsets({ groupId, topic, partitions: [{ partition: 0, offset: '5' }] }), 'admin.setOffsets')
    const afterSet = await committed(admin, groupId, topic)
    assert.deepEqual(afterSet, ['5', ...ends.slice(1).map(String)], `after setOffsets: ${JSON.stringify(afterSet)}`)
    ok(`admin.setOffsets: partition 0 committed at 5, others kept: ${JSON.stringify(afterSet)}`)
    for (let o = 5; o < ends[0]; o++) run.seen.delete(`0:${o}`)
    const c3 = await startMember(run, groupId, 'member-3')
    members.push(c3)
    await awaitConsumed(run, 'group: new member after setOffsets reads partition 0 from 5', ends, [c3])
    await awaitCommitted(admin, 'group: new member after setOffsets', groupId, topic, ends)
    await stopMember(c3)
    members.pop()

    // resetOffsets commits "earliest" (-2); fetchOffsets with
    // resolveOffsets turns it into the log start offsets and commits them.
    await withTimeout(admin.resetOffsets({ groupId, topic, earliest: true }), 'admin.resetOffsets')
    const resolved = await withTimeout(admin.fetchOffsets({ groupId, topics: [topic], resolveOffsets: true }), 'admin.fetchOffsets(resolveOffsets)')
    const resolvedOffs = resolved[0].partitions.sort((a, b) => a.partition - b.partition).map(p => p.offset)
    assert.deepEqual(resolvedOffs, ['0', '0', '0', '0'], `fetchOffsets(resolveOffsets) after resetOffsets(earliest): ${JSON.stringify(resolved)}`)
    assert.deepEqual(await committed(admin, groupId, topic), ['0', '0', '0', '0'])
    ok('admin.resetOffsets(earliest) + fetchOffsets(resolveOffsets): every partition committed at 0')

    // deleteGroups once empty, then the group is gone.
    const del = await withTimeout(admin.deleteGroups([groupId]), 'admin.deleteGroups')
    assert.deepEqual(del.map(r => [r.groupId, r.errorCode]), [[groupId, 0]], `deleteGroups: ${JSON.stringify(del)}`)
    assert.equal(await listed(admin, groupId), undefined, 'admin.listGroups still lists the deleted group')
    assert.deepEqual(await committed(admin, groupId, topic), ['-1', '-1', '-1', '-1'])
    await assert.rejects(
      withTimeout(admin.deleteGroups([groupId]), 'admin.deleteGroups (again)'),
      e => e.name === 'KafkaJSDeleteGroupsError' && e.groups[0].error.type === 'GROUP_ID_NOT_FOUND',
      'admin.deleteGroups of a deleted group'
    )
    ok('admin.deleteGroups: deleted (no longer listed, no offsets); deleting again is GROUP_ID_NOT_FOUND')
    console.log(`INFO: kafkajs group consumer requests: ${[...run.apis].filter(a => /Group|Coordinator|Offset|Heartbeat/.test(a)).sort().join(', ')}`)
  } finally {
    await Promise.allSettled([
      ...members.map(m => withTimeout(m.consumer.disconnect(), `${m.name}: disconnect`, 10000)),
      withTimeout(producer.disconnect(), 'group producer.disconnect', 5000),
    ])
  }
}

async function main() {
  const admin = kafka.admin()
  await withTimeout(admin.connect(), 'admin.connect')
  const producer = kafka.producer({
    allowAutoTopicCreation: false,
    createPartitioner: Partitioners.DefaultPartitioner,
  })
  const idem = kafka.producer({
    allowAutoTopicCreation: false,
    createPartitioner: Partitioners.DefaultPartitioner,
    idempotent: true,
    maxInFlightRequests: 1,
  })
  const { CREATE_CLUSTER } = privateSymbols(kafka)
  const consumerCluster = kafka[CREATE_CLUSTER]({
    metadataMaxAge: 300000,
    allowAutoTopicCreation: false,
    isolationLevel: ISOLATION_LEVEL.READ_COMMITTED,
  })
  try {
    const nodeId = await adminChecks(admin)

    await withTimeout(producer.connect(), 'producer.connect')
    await withTimeout(idem.connect(), 'idempotent producer.connect')
    const counts = {}
    for (const [name, compression] of [['none', CompressionTypes.None], ['gzip', CompressionTypes.GZIP]]) {
      const t0 = Date.now()
      counts[name] = await produce(producer, topics[name], compression)
      ok(`${topics[name]}: produced ${RECORDS} records (${name}, acks -1) in ${Date.now() - t0} ms, base offsets as expected`)
    }
    {
      const t0 = Date.now()
      counts.idem = await produce(idem, topics.idem, CompressionTypes.GZIP)
      ok(`${topics.idem}: idempotent producer sent ${RECORDS} records (gzip, acks -1) in ${Date.now() - t0} ms`)
    }

    for (const name of ['none', 'gzip', 'idem']) await offsetChecks(admin, topics[name], counts[name])

    await withTimeout(consumerCluster.connect(), 'cluster.connect')
    for (const name of ['none', 'gzip', 'idem']) await consume(consumerCluster, topics[name], counts[name], nodeId, name === 'idem')

    await deleteChecks(admin, producer)
    await groupChecks(admin)
  } finally {
    await Promise.allSettled([
      withTimeout(producer.disconnect(), 'producer.disconnect', 5000),
      withTimeout(idem.disconnect(), 'idempotent producer.disconnect', 5000),
      withTimeout(consumerCluster.disconnect(), 'cluster.disconnect', 5000),
      withTimeout(admin.disconnect(), 'admin.disconnect', 5000),
    ])
  }
}

// privateSymbols finds the Kafka object's private symbols by description.
function privateSymbols(obj) {
  const out = {}
  for (const s of Object.getOwnPropertySymbols(obj)) {
    const m = /^private:Kafka:(.+)$/.exec(s.description || '')
    if (m) out[m[1].replace(/[A-Z]/g, c => '_' + c).toUpperCase()] = s
  }
  if (!out.CREATE_CLUSTER) throw new Error('kafkajs internals changed: no private:Kafka:createCluster symbol')
  return out
}

main().then(
  () => {
    console.log(`kafkajs compat: all ${passed} checks passed`)
    process.exit(0)
  },
  err => {
    console.error(`FAIL: ${err && err.stack ? err.stack : err}`)
    console.log(`kafkajs compat: FAILED after ${passed} checks passed`)
    process.exit(1)
  }
)
