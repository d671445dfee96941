// A liveness probe in a process of its own (bench --overload): GET every 100 ms on a new
// connection, as an orchestrator's probe does, with a 1-s time-out. On a message from its parent
// it answers with the latencies of the probes answered 200 and the count of the others.
import { get } from 'node:http';
import { performance } from 'node:perf_hooks';
import { clearInterval, setInterval } from 'node:timers';

const [port, path = '/api/public/health/live'] = process.argv.slice(2);
const latencies = [];
let failures = 0;
const timer = setInterval(() => {
  const started = performance.now();
  let settled = false;
  const fail = () => {
    if (settled) return;
    settled = true;
    failures++;
  };
  const req = get({ host: '127.0.0.1', port: Number(port), path, agent: false, timeout: 1000 }, (res) => {
    res.resume();
    res.on('end', () => {
      if (settled) return;
      settled = true;
      if (res.statusCode === 200) latencies.push(performance.now() - started);
      else failures++;
    });
  });
  req.on('timeout', () => {
    fail();
    req.destroy();
  });
  req.on('error', fail);
}, 100);

process.send('running');
process.on('message', () => {
  clearInterval(timer);
  process.send({ latencies, failures }, () => process.exit(0));
});
