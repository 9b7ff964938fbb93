package atoll.tests;

import io.lettuce.core.RedisURI;
import io.lettuce.core.TimeoutOptions;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.cluster.ClusterClientOptions;
import io.lettuce.core.cluster.ClusterTopologyRefreshOptions;
import io.lettuce.core.cluster.RedisClusterClient;
import io.lettuce.core.cluster.SlotHash;
import io.lettuce.core.cluster.api.StatefulRedisClusterConnection;
import io.lettuce.core.cluster.event.RedirectionEventSupport;
import io.lettuce.core.cluster.models.partitions.RedisClusterNode;
import io.lettuce.core.event.DefaultEventBus;
import io.lettuce.core.event.Event;
import io.lettuce.core.event.EventBus;
import io.lettuce.core.resource.ClientResources;
import io.lettuce.core.resource.DefaultClientResources;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicLong;
import reactor.core.publisher.Flux;
import reactor.core.scheduler.Schedulers;
import redis.clients.jedis.BuilderFactory;
import redis.clients.jedis.CommandArguments;
import redis.clients.jedis.CommandObject;
import redis.clients.jedis.Connection;
import redis.clients.jedis.ConnectionPoolConfig;
import redis.clients.jedis.DefaultJedisClientConfig;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.JedisClientConfig;
import redis.clients.jedis.Protocol;
import redis.clients.jedis.RedisClusterClient.Builder;
import redis.clients.jedis.StaticCommandFlagsRegistry;
import redis.clients.jedis.exceptions.JedisRedirectionException;
import redis.clients.jedis.executors.ClusterCommandExecutor;
import redis.clients.jedis.providers.ClusterConnectionProvider;
import redis.clients.jedis.util.JedisClusterCRC16;

/**
 * A cluster-aware Java client through whatever the test does to the cluster (a reshard, a
 * master killed): Jedis's cluster client or Lettuce's, by the first argument. Then the seed
 * nodes (host:port,host:port…) and a key prefix. It INCRs PREFIX:0 … PREFIX:299 in turn, spread
 * over the slots, each INCR followed by WAIT 1 100 on the connection the INCR ran on, and keeps
 * the highest value WAIT confirmed per key. It prints "ready" after its first INCR, then a line
 * "incrs N errors M" now and then, and on a line "stop" (or EOF) on stdin one JSON line: INCRs,
 * errors, confirmed values, redirections the client followed and the longest time without a
 * successful INCR. tests/python/test_cluster_clients.py runs it (the same protocol as
 * tests/go/cluster_client).
 */
public final class ClusterLoad {
    private static final int KEYS = 300;
    private static final int SOCKET_TIMEOUT_MS = 1000;

    /** One client's way of doing an INCR and its WAIT. */
    interface Load extends AutoCloseable {
        /** INCRs key (throwing if it failed) and says whether WAIT 1 confirmed the value. */
        Step step(String key);

        /** MOVED and ASK redirections the client followed. */
        long redirects();
    }

    record Step(long value, boolean confirmed) {}

    public static void main(String[] args) throws Exception {
        if (args.length != 3 || !(args[0].equals("jedis") || args[0].equals("lettuce"))) {
            System.err.println("usage: ClusterLoad jedis|lettuce host:port[,host:port…] prefix");
            System.exit(2);
        }
        List<HostAndPort> seeds = new ArrayList<>();
        for (String s : args[1].split(",")) {
            seeds.add(HostAndPort.from(s));
        }
        String prefix = args[2];

        Thread reader = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = in.readLine()) != null && !line.trim().equals("stop")) {
                    // Anything else on stdin is not for us.
                }
            } catch (Exception e) {
                // A broken stdin ends the run as EOF does.
            }
            stop = true;
        });
        reader.setDaemon(true);
        reader.start();

        long incrs = 0;
        long errors = 0;
        double maxGap = 0;
        long lastOk = 0;
        long lastReport = System.nanoTime();
        long deadline = System.nanoTime() + Duration.ofSeconds(400).toNanos();
        Map<String, Long> confirmed = new TreeMap<>();
        // The first few kinds of error, to stderr: what a failed run shows.
        Set<String> seen = new HashSet<>();
        Load load = args[0].equals("jedis") ? new JedisLoad(seeds) : new LettuceLoad(seeds);
        try (load) {
            for (int i = 0; !stop; i++) {
                if (System.nanoTime() > deadline) {
                    System.err.println("no stop before the limit");
                    System.exit(1);
                }
                String key = prefix + ":" + (i % KEYS);
                Step step;
                try {
                    step = load.step(key);
                } catch (RuntimeException e) {
                    errors++;
                    String kind = e.getClass().getSimpleName() + ": " + e.getMessage();
                    if (seen.size() < 10 && seen.add(kind)) {
                        System.err.println(args[0] + ": " + kind);
                    }
                    Thread.sleep(50);
                    continue;
                }
                long now = System.nanoTime();
                if (lastOk == 0) {
                    System.out.println("ready");
                    System.out.flush();
                } else {
                    maxGap = Math.max(maxGap, (now - lastOk) / 1e9);
                }
                lastOk = now;
                incrs++;
                if (step.confirmed() && step.value() > confirmed.getOrDefault(key, 0L)) {
                    confirmed.put(key, step.value());
                }
                if (now - lastReport > 200_000_000L) {
                    System.out.println("incrs " + incrs + " errors " + errors);
                    System.out.flush();
                    lastReport = now;
                }
            }
            if (lastOk != 0) {
                maxGap = Math.max(maxGap, (System.nanoTime() - lastOk) / 1e9);
            }
            StringBuilder json = new StringBuilder();
            json.append("{\"incrs\":").append(incrs).append(",\"errors\":").append(errors)
                    .append(",\"redirects\":").append(load.redirects()).append(",\"confirmed\":{");
            String sep = "";
            for (Map.Entry<String, Long> e : confirmed.entrySet()) {
                // Keys are the prefix (from the test: no quotes or backslashes) and a number.
                json.append(sep).append('"').append(e.getKey()).append("\":").append(e.getValue());
                sep = ",";
            }
            json.append("},\"max_gap_s\":").append(String.format("%.3f", maxGap)).append('}');
            System.out.println(json);
            System.out.flush();
        }
        // Client threads (Lettuce's event loops) must not keep the JVM up.
        System.exit(0);
    }

    private static volatile boolean stop;

    /**
     * Jedis 8's cluster client, RedisClusterClient (JedisCluster is deprecated in Jedis 8 in its
     * favour; the same executor and connection provider underneath). It borrows a pooled
     * connection to the slot's master for each command and follows MOVED (renewing its slot
     * map) and ASK by itself.
     *
     * WAIT: UnifiedJedis.waitReplicas(sampleKey, replicas, timeout) takes a key, but Jedis 8's
     * cluster executor routes a command by its request policy first, and its static command
     * table gives WAIT Redis's own command tip, request_policy:all_shards (response agg_min):
     * the WAIT goes to every master, one after another, and the reply is the least count, so
     * once a promoted replica is a master without a replica of its own every WAIT takes its
     * full timeout there and answers 0 for every key. What the test wants is the INCR's
     * master, on the INCR's connection (WAIT counts the replicas that acknowledged this
     * connection's last write): getConnectionFromSlot borrows from the slot's master's pool,
     * from which the INCR's connection was just returned, so one thread borrowing from a LIFO
     * pool gets it back. "Usually" is not enough for the check, so the executor below records
     * the connection each command succeeded on, and a WAIT confirms the INCR only on that one
     * (after a MOVED or ASK, the target's connection the INCR was sent on to, which the
     * renewed slot map names after MOVED, and no map names during a migration after ASK).
     */
    static final class JedisLoad implements Load {
        /** The executor Jedis's builder would make, recording where each command ran. */
        static final class Recording extends ClusterCommandExecutor {
            Connection last;
            long redirects;

            Recording(ClusterConnectionProvider provider, int maxAttempts, Duration maxTotalRetries) {
                super(provider, maxAttempts, maxTotalRetries, StaticCommandFlagsRegistry.registry());
            }

            @Override
            protected <T> T execute(Connection connection, CommandObject<T> command) {
                try {
                    T reply = super.execute(connection, command);
                    last = connection;
                    return reply;
                } catch (JedisRedirectionException e) {
                    redirects++;
                    throw e;
                }
            }
        }

        private static final CommandObject<Long> WAIT =
                new CommandObject<>(new CommandArguments(Protocol.Command.WAIT).add(1).add(100), BuilderFactory.LONG);

        private final redis.clients.jedis.RedisClusterClient client;
        private final Recording executor;

        JedisLoad(List<HostAndPort> seeds) {
            JedisClientConfig config = DefaultJedisClientConfig.builder()
                    .connectionTimeoutMillis(500).socketTimeoutMillis(SOCKET_TIMEOUT_MS).build();
            Set<HostAndPort> nodes = new LinkedHashSet<>(seeds);
            // Jedis's defaults otherwise: no periodic topology refresh (the slot map is renewed
            // on MOVED and after connection failures), 5 attempts within 5 socket timeouts.
            ClusterConnectionProvider provider = new ClusterConnectionProvider(nodes, config, new ConnectionPoolConfig());
            executor = new Recording(provider, 5, Duration.ofMillis(5L * SOCKET_TIMEOUT_MS));
            Builder builder = redis.clients.jedis.RedisClusterClient.builder();
            builder.nodes(nodes).clientConfig(config).connectionProvider(provider).commandExecutor(executor);
            client = builder.build();
        }

        @Override
        public Step step(String key) {
            executor.last = null;
            long value = client.incr(key);
            Connection incrOn = executor.last;
            try (Connection c = client.getConnectionFromSlot(JedisClusterCRC16.getSlot(key))) {
                long acked = c.executeCommand(WAIT);
                return new Step(value, acked >= 1 && c == incrOn);
            } catch (RuntimeException e) {
                // The INCR succeeded; only its confirmation failed.
                return new Step(value, false);
            }
        }

        @Override
        public long redirects() {
            return executor.redirects;
        }

        @Override
        public void close() {
            client.close();
        }
    }

    /**
     * Lettuce's RedisClusterClient with its topology refreshed on every adaptive trigger (MOVED,
     * ASK, persistent reconnects …) and every second. INCR goes through the cluster API; WAIT
     * through connection.getConnection(host, port) of the slot's master, which is the very
     * connection the cluster connection writes that slot's commands on: Lettuce's
     * PooledClusterConnectionProvider keys its write connection for a slot by the master's host
     * and port (ConnectionKey(WRITE, host, port), "always host and port for slot-oriented
     * operations"), and getConnection(host, port) looks up the same key. (getConnection(nodeId)
     * would not: it is keyed by node id, a second connection to the same node, on which WAIT
     * would count acknowledgements of that connection's writes, not the INCR's.)
     *
     * A MOVED or ASK sends the INCR on to another node's connection; Lettuce announces each on
     * its event bus (ClusterDistributionChannelWriter publishes before it writes the command
     * again), and the bus here counts them as it is handed them, so a step whose INCR was
     * redirected, or whose slot changed masters meanwhile, is not confirmed.
     */
    static final class LettuceLoad implements Load {
        /** Lettuce's own event bus, counting redirections at publish time (synchronously). */
        static final class CountingBus implements EventBus {
            final EventBus inner = new DefaultEventBus(Schedulers.boundedElastic());
            final AtomicLong redirects = new AtomicLong();

            @Override
            public Flux<Event> get() {
                return inner.get();
            }

            @Override
            public void publish(Event event) {
                if (event instanceof RedirectionEventSupport) {
                    redirects.incrementAndGet();
                }
                inner.publish(event);
            }
        }

        private final CountingBus bus = new CountingBus();
        private final ClientResources resources;
        private final RedisClusterClient client;
        private final StatefulRedisClusterConnection<String, String> connection;

        LettuceLoad(List<HostAndPort> seeds) {
            resources = DefaultClientResources.builder().eventBus(bus).build();
            List<RedisURI> uris = new ArrayList<>();
            for (HostAndPort s : seeds) {
                uris.add(RedisURI.builder().withHost(s.getHost()).withPort(s.getPort())
                        .withTimeout(Duration.ofMillis(SOCKET_TIMEOUT_MS)).build());
            }
            client = RedisClusterClient.create(resources, uris);
            ClusterTopologyRefreshOptions refresh = ClusterTopologyRefreshOptions.builder()
                    .enableAllAdaptiveRefreshTriggers()
                    .enablePeriodicRefresh(Duration.ofSeconds(1))
                    .build();
            client.setOptions(ClusterClientOptions.builder()
                    .topologyRefreshOptions(refresh)
                    // A command on a dead master's connection fails after this, rather than
                    // waiting for a reconnect that never comes.
                    .timeoutOptions(TimeoutOptions.enabled(Duration.ofMillis(SOCKET_TIMEOUT_MS)))
                    .build());
            connection = client.connect();
        }

        @Override
        public Step step(String key) {
            int slot = SlotHash.getSlot(key);
            RedisClusterNode before = connection.getPartitions().getMasterBySlot(slot);
            long redirectsBefore = bus.redirects.get();
            long value = connection.sync().incr(key);
            RedisClusterNode after = connection.getPartitions().getMasterBySlot(slot);
            boolean sameWriter = bus.redirects.get() == redirectsBefore && before != null && after != null
                    && before.getUri().getHost().equals(after.getUri().getHost())
                    && before.getUri().getPort() == after.getUri().getPort();
            if (after == null) {
                return new Step(value, false);
            }
            try {
                StatefulRedisConnection<String, String> node =
                        connection.getConnection(after.getUri().getHost(), after.getUri().getPort());
                long acked = node.sync().waitForReplication(1, 100);
                return new Step(value, sameWriter && acked >= 1);
            } catch (RuntimeException e) {
                return new Step(value, false);
            }
        }

        @Override
        public long redirects() {
            return bus.redirects.get();
        }

        @Override
        public void close() {
            connection.close();
            client.shutdown(Duration.ZERO, Duration.ofSeconds(2));
            resources.shutdown();
        }
    }
}
