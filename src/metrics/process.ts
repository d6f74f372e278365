// The standard process_* metrics (the names Prometheus' own clients use, so stock dashboards and
// alerts work), read when scraped: CPU from the runtime, memory and file descriptors from
// /proc/self on Linux. What cannot be read here (another OS, a locked-down /proc) is left out,
// never guessed and never an error.
import { readdirSync, readFileSync } from "node:fs";
import type { Exposition } from "./exposition";

/** Unix seconds when this process started: now less its uptime, taken once. */
const STARTED_SECONDS = Date.now() / 1000 - process.uptime();

export function writeProcessMetrics(out: Exposition): void {
  const cpu = process.cpuUsage(); // microseconds
  out.family("process_cpu_user_seconds_total", "counter", "User CPU time spent, in seconds.").sample("process_cpu_user_seconds_total", "", cpu.user / 1e6);
  out
    .family("process_cpu_system_seconds_total", "counter", "System CPU time spent, in seconds.")
    .sample("process_cpu_system_seconds_total", "", cpu.system / 1e6);
  out
    .family("process_cpu_seconds_total", "counter", "User and system CPU time spent, in seconds.")
    .sample("process_cpu_seconds_total", "", (cpu.user + cpu.system) / 1e6);
  out
    .family("process_start_time_seconds", "gauge", "Start time of the process since the Unix epoch, in seconds.")
    .sample("process_start_time_seconds", "", Math.round(STARTED_SECONDS));

  const status = read("/proc/self/status");
  const rss = kilobytes(status, "VmRSS") ?? process.memoryUsage.rss();
  out.family("process_resident_memory_bytes", "gauge", "Resident memory size, in bytes.").sample("process_resident_memory_bytes", "", rss);
  const virtual = kilobytes(status, "VmSize");
  if (virtual !== undefined)
    out.family("process_virtual_memory_bytes", "gauge", "Virtual memory size, in bytes.").sample("process_virtual_memory_bytes", "", virtual);

  const fds = openFds();
  if (fds !== undefined) out.family("process_open_fds", "gauge", "Open file descriptors.").sample("process_open_fds", "", fds);
  const max = /^Max open files\s+(\d+)/m.exec(read("/proc/self/limits") ?? "");
  if (max) out.family("process_max_fds", "gauge", "Maximum number of open file descriptors (the soft limit).").sample("process_max_fds", "", Number(max[1]));
}

function read(file: string): string | undefined {
  try {
    return readFileSync(file, "utf8");
  } catch {
    return undefined;
  }
}

/** A `Name:   123 kB` line of /proc/self/status, in bytes. */
function kilobytes(status: string | undefined, name: string): number | undefined {
  const match = status === undefined ? null : new RegExp(`^${name}:\\s+(\\d+) kB`, "m").exec(status);
  return match ? Number(match[1]) * 1024 : undefined;
}

function openFds(): number | undefined {
  try {
    // Less the descriptor readdir itself holds open on the directory while listing it.
    return readdirSync("/proc/self/fd").length - 1;
  } catch {
    return undefined;
  }
}
