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
// InitProducerId <= 1.
//
// Consumption: kafkajs has no group-less consumer, and weir has no consumer
// groups yet (no FindCoordinator/JoinGroup). The records are therefore read
// back through kafkajs's own consumer fetch path below its group layer:
// the Cluster the Kafka object builds for a consumer (isolation level
// READ_COMMITTED, the consumer default), Broker.fetch (Fetch v11) and the
// consumer's Batch class, exactly as ConsumerGroup.fetch uses them. These
// are kafkajs internals, not public API; the public group consumer is only
// probed, and reported, at the end.

const assert = require('node:assert/strict')
const { Kafka, logLevel, CompressionTypes, Partitioners } = require('kafkajs')
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

// probeGroupConsumer tries the public (group) consumer and reports what
// happens; it asserts nothing, since weir has no consumer groups yet.
async function probeGroupConsumer() {
  const consumer = kafka.consumer({ groupId: `kafkajs-probe-${suffix}`, retry: { retries: 0 } })
  let outcome
  try {
    const crashed = new Promise(resolve =>
      consumer.on(consumer.events.CRASH, e => resolve(`crashed: ${e.payload.error.name}: ${e.payload.error.message}`))
    )
    await withTimeout(consumer.connect(), 'consumer.connect', 10000)
    await withTimeout(consumer.subscribe({ topics: [topics.none], fromBeginning: true }), 'consumer.subscribe', 10000)
    let got = 0
    await withTimeout(consumer.run({ eachMessage: async () => { got++ } }), 'consumer.run', 10000)
    outcome = await withTimeout(crashed, 'consumer crash', 10000).catch(() => `running, ${got} records after 10 s`)
  } catch (e) {
    outcome = `failed: ${e.name}: ${e.message}`
  } finally {
    await withTimeout(consumer.disconnect(), 'consumer.disconnect', 10000).catch(() => {})
  }
  console.log(`INFO: kafkajs group consumer (needs FindCoordinator/JoinGroup, not in weir yet): ${outcome}`)
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
    await probeGroupConsumer()
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
