// failfast_exception: a named thread ("Supervisor") catches an exception from
// its membership check and stops the process with
// Environment.FailFast(message, exception), as an Orleans silo told it is dead
// does. The runtime writes the dump itself (DOTNET_DbgEnableMiniDump=1).
using System.Runtime.CompilerServices;

namespace Knot.Samples.FailFastException;

static class Program
{
    public const string Message = "silo declared dead: stopping the process";

    static int Main()
    {
        Thread.CurrentThread.Name = "Main";
        var supervisor = new Thread(Supervise) { Name = "Supervisor" };
        supervisor.Start();
        supervisor.Join();
        return 0;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void Supervise()
    {
        try
        {
            CheckMembership();
        }
        catch (Exception e)
        {
            Environment.FailFast(Message, e);
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void CheckMembership() =>
        throw new InvalidOperationException("silo 10.0.0.7:11111 is marked Dead in the membership table");
}
