// A clock whose timers fire only when the test moves it (src/timers.ts's Clock), and a wait that
// lets every pending continuation run, so a test sees what the code does at a given time.
import type { Clock } from "../../src/timers";

export class TestClock implements Clock {
  private timers: { at: number; fn: () => void }[] = [];
  constructor(public time = 0) {}
  now(): number {
    return this.time;
  }
  after(ms: number, fn: () => void): () => void {
    const timer = { at: this.time + ms, fn };
    this.timers.push(timer);
    return () => {
      this.timers = this.timers.filter((t) => t !== timer);
    };
  }
  /** Timers armed and not yet fired or cancelled. */
  get pending(): number {
    return this.timers.length;
  }
  /** Moves the time on, firing the timers that fall due, earliest first. */
  advance(ms: number): void {
    this.time += ms;
    for (;;) {
      const due = this.timers.filter((t) => t.at <= this.time).sort((a, b) => a.at - b.at)[0];
      if (due === undefined) return;
      this.timers = this.timers.filter((t) => t !== due);
      due.fn();
    }
  }
}

/** Lets every continuation run (the code under test is then waiting only on the test's timers and promises). */
export const quiet = () => new Promise<void>((resolve) => setImmediate(resolve));
