// async_tcs: async stacks that hold no thread.  Each "order" runs
// HandleOrderAsync -> LoadOrderAsync -> FetchFromBackendAsync, which awaits a
// TaskCompletionSource's task that nobody ever completes.  Orders 0..3 each
// await their own backend reply (four identical async stacks); orders 4 and 5
// await one shared reply (one task with two continuations).  Main blocks in
// GetAwaiter().GetResult() on order 0's task: a thread waiting for an async
// stack that never completes.
using System.Runtime.CompilerServices;

namespace Knot.Samples.AsyncTcs;

static class Program
{
    const int OwnReplies = 4;

    static int Main()
    {
        Thread.CurrentThread.Name = "Main";
        var orders = new List<Task<int>>();
        var replies = new List<TaskCompletionSource<int>>();
        for (int i = 0; i < OwnReplies; i++)
        {
            var reply = new TaskCompletionSource<int>();
            replies.Add(reply);
            orders.Add(HandleOrderAsync(i, reply.Task));
        }
        var shared = new TaskCompletionSource<int>();
        replies.Add(shared);
        orders.Add(HandleOrderAsync(OwnReplies, shared.Task));
        orders.Add(HandleOrderAsync(OwnReplies + 1, shared.Task));
        Console.Out.WriteLine("ready");
        Console.Out.Flush();
        int total = WaitForFirstOrder(orders[0]);
        GC.KeepAlive(replies);
        GC.KeepAlive(orders);
        return total;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static int WaitForFirstOrder(Task<int> order) => order.GetAwaiter().GetResult();

    static async Task<int> HandleOrderAsync(int id, Task<int> reply)
    {
        int amount = await LoadOrderAsync(id, reply);
        return amount + id;
    }

    static async Task<int> LoadOrderAsync(int id, Task<int> reply)
    {
        string key = $"order-{id}";
        int price = await FetchFromBackendAsync(key, reply);
        return price * 2;
    }

    static async Task<int> FetchFromBackendAsync(string key, Task<int> reply)
    {
        int value = await reply;
        return value + key.Length;
    }
}
