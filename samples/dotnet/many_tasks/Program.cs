// many_tasks: ~100k async state machines on the heap, for `cargo xtask bench dotnet-async`
// (knot's async stacks against SOS dumpasync). CHAINS async stacks (default 4,000), each
// HandleAsync -> Level(DEPTH) -> ... -> Level(0) (DEPTH default 24) -> a TaskCompletionSource's
// task that nobody completes: DEPTH + 2 state machine boxes and one awaited task per stack, so
// 4,000 x 27 = 108,000 tasks. Prints `ready`, then sleeps until killed.
namespace Knot.Samples.ManyTasks;

static class Program
{
    static int Main(string[] args)
    {
        int chains = args.Length > 0 ? int.Parse(args[0]) : 4_000;
        int depth = args.Length > 1 ? int.Parse(args[1]) : 24;
        var replies = new TaskCompletionSource<int>[chains];
        var stacks = new Task<int>[chains];
        for (int i = 0; i < chains; i++)
        {
            replies[i] = new TaskCompletionSource<int>();
            stacks[i] = HandleAsync(i, depth, replies[i].Task);
        }
        Console.Out.WriteLine("ready");
        Console.Out.Flush();
        Thread.Sleep(Timeout.Infinite);
        GC.KeepAlive(replies);
        GC.KeepAlive(stacks);
        return 0;
    }

    static async Task<int> HandleAsync(int id, int depth, Task<int> reply)
    {
        int v = await Level(depth, reply);
        return v + id;
    }

    static async Task<int> Level(int depth, Task<int> reply)
    {
        if (depth == 0)
            return await reply;
        int v = await Level(depth - 1, reply);
        return v + 1;
    }
}
